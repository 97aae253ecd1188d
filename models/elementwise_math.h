// The per-element math of training, written once for the CPU backend and the CUDA kernels alike:
// activations, normalization, dropout masks, softmax cross-entropy, optimizer updates, push-sum scaling
// and adding, and the delayed compensation of parameter mixing (docs/algorithms.md). Each function works on one element
// (or one row for the loss) so a CPU loop or a CUDA thread can call it. All functions are pure apart from their
// pointer/reference outputs, and thread-safe for disjoint outputs. nvcc 13 compiles this header (only <cmath>,
// <cstdint>).
#pragma once

#include <cmath>
#include <cstdint>

#include "models/host_device.h"

namespace meridian::models::math {

MERIDIAN_HOST_DEVICE inline float relu(float x) { return x > 0.0f ? x : 0.0f; }

// Gradient of ReLU given its output y (y > 0 exactly where the input was > 0) and the upstream dy.
MERIDIAN_HOST_DEVICE inline float relu_backward(float y, float dy) { return y > 0.0f ? dy : 0.0f; }

// GELU as torch.nn.GELU() (the exact form): x·Φ(x) with Φ the standard normal CDF.
MERIDIAN_HOST_DEVICE inline float gelu(float x) { return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f)); }

// Gradient of GELU at input x: Φ(x) + x·φ(x), times the upstream dy.
MERIDIAN_HOST_DEVICE inline float gelu_backward(float x, float dy) {
  const float cdf = 0.5f * (1.0f + erff(x * 0.70710678118654752f));
  const float pdf = 0.39894228040143268f * expf(-0.5f * x * x);
  return dy * (cdf + x * pdf);
}

MERIDIAN_HOST_DEVICE inline float tanh_forward(float x) { return tanhf(x); }
// Gradient of tanh given its output y: 1 − y².
MERIDIAN_HOST_DEVICE inline float tanh_backward(float y, float dy) { return dy * (1.0f - y * y); }

// The logistic function; the branch keeps expf's argument non-positive, so it never overflows.
MERIDIAN_HOST_DEVICE inline float sigmoid(float x) {
  if (x >= 0.0f) return 1.0f / (1.0f + expf(-x));
  const float e = expf(x);
  return e / (1.0f + e);
}
// Gradient of the logistic function given its output y: y·(1 − y).
MERIDIAN_HOST_DEVICE inline float sigmoid_backward(float y, float dy) { return dy * y * (1.0f - y); }

// Normalization (batch norm, group norm): y = γ·(x − mean)·inv_std + β, inv_std = 1/√(var + eps).
MERIDIAN_HOST_DEVICE inline float inverse_std(float variance, float eps) { return 1.0f / sqrtf(variance + eps); }
MERIDIAN_HOST_DEVICE inline float normalize(float x, float mean, float inv_std, float gamma, float beta) {
  return gamma * (x - mean) * inv_std + beta;
}

// Input gradient of a normalization whose statistics came from the normalized values themselves, for one
// element: g = γ·dy its scaled upstream gradient, x̂ = (x − mean)·inv_std its normalized value, and
// mean_g, mean_g_xhat the means of g and g·x̂ over the elements that share its statistics:
// dx = inv_std·(g − mean_g − x̂·mean_g_xhat).
MERIDIAN_HOST_DEVICE inline float normalization_input_gradient(float g, float xhat, float inv_std, float mean_g,
                                                               float mean_g_xhat) {
  return inv_std * (g - mean_g - xhat * mean_g_xhat);
}

// Running statistic as torch's batch norm keeps it: r ← (1 − momentum)·r + momentum·value.
MERIDIAN_HOST_DEVICE inline float running_update(float running, float value, float momentum) {
  return (1.0f - momentum) * running + momentum * value;
}

// Dropout mask: element i of the draw `key` is kept with probability 1 − p. A counter-based hash
// (SplitMix64's finalizer of key and index) rather than a stream, so any thread can draw any element
// and the CPU and the GPU draw the same mask.
MERIDIAN_HOST_DEVICE inline bool dropout_keep(std::uint64_t key, std::uint64_t index, float p) {
  std::uint64_t z = key + (index + 1) * 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  z ^= z >> 31;
  const float unit = static_cast<float>(z >> 40) * (1.0f / 16777216.0f);  // 24 bits: exact in [0, 1)
  return unit >= p;
}
// Kept elements are scaled by 1/(1 − p) (inverted dropout, as torch), dropped ones are zero; the same
// for the gradient.
MERIDIAN_HOST_DEVICE inline float dropout(float x, bool keep, float scale) { return keep ? x * scale : 0.0f; }

// Softmax cross-entropy of one row of `classes` logits against `label`. Writes
// dlogits[c] = scale * (softmax(logits)[c] - [c == label]) and returns the row's loss
// -log softmax(logits)[label]. Subtracting the row maximum keeps exp() from overflowing.
// Precondition: 0 <= label < classes (checked by the caller, which knows where the label came from).
MERIDIAN_HOST_DEVICE inline float softmax_cross_entropy_row(const float* logits, int classes, int label, float scale,
                                                            float* dlogits) {
  float max_logit = logits[0];
  for (int c = 1; c < classes; ++c) max_logit = logits[c] > max_logit ? logits[c] : max_logit;
  float sum = 0.0f;
  for (int c = 0; c < classes; ++c) {
    const float e = expf(logits[c] - max_logit);
    dlogits[c] = e;
    sum += e;
  }
  const float inv_sum = 1.0f / sum;
  for (int c = 0; c < classes; ++c) dlogits[c] *= inv_sum * scale;
  dlogits[label] -= scale;
  return logf(sum) - (logits[label] - max_logit);
}

// Plain SGD with L2 weight decay folded into the gradient (PyTorch's convention):
// g' = g + wd·w; w ← w − lr·g'.
MERIDIAN_HOST_DEVICE inline void sgd_update(float& w, float g, float lr, float weight_decay) {
  w -= lr * (g + weight_decay * w);
}

// Heavy-ball momentum (u ← m·u + g, w ← w − γ·u), PyTorch's convention without
// dampening; with `nesterov` the step is g' + m·u (the look-ahead form PyTorch uses).
MERIDIAN_HOST_DEVICE inline void momentum_update(float& w, float& u, float g, float lr, float momentum,
                                                 float weight_decay, bool nesterov) {
  const float g_decayed = g + weight_decay * w;
  u = momentum * u + g_decayed;
  w -= lr * (nesterov ? g_decayed + momentum * u : u);
}

// Adam (Kingma & Ba) with L2 weight decay folded into the gradient, as torch.optim.Adam.
// bias_correction1 = 1 − β1^t and bias_correction2 = 1 − β2^t for the step t (1-based) being taken.
MERIDIAN_HOST_DEVICE inline void adam_update(float& w, float& m, float& v, float g, float lr, float beta1, float beta2,
                                             float eps, float weight_decay, float bias_correction1,
                                             float bias_correction2) {
  const float g_decayed = g + weight_decay * w;
  m = beta1 * m + (1.0f - beta1) * g_decayed;
  v = beta2 * v + (1.0f - beta2) * g_decayed * g_decayed;
  const float denom = sqrtf(v / bias_correction2) + eps;
  w -= (lr / bias_correction1) * m / denom;
}

// Push-sum (SGP): scale a share before sending it (x ← s·x) and add a received share (x ← x + y).
MERIDIAN_HOST_DEVICE inline void push_sum_scale(float& x, float share) { x *= share; }
MERIDIAN_HOST_DEVICE inline void push_sum_add(float& x, float received) { x += received; }

// Delayed compensation for parameter mixing (docs/algorithms.md): x ← x + (m − s), where s is the snapshot
// taken at step s and m the mixed value that came back for it; keeps the local progress since s.
MERIDIAN_HOST_DEVICE inline void delayed_compensation(float& x, float mixed, float snapshot) { x += mixed - snapshot; }

}  // namespace meridian::models::math
