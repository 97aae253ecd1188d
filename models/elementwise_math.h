// The per-element math of training, written once for the CPU backend and the CUDA kernels alike:
// activations, softmax cross-entropy, optimizer updates, push-sum scaling and adding, and the delayed
// compensation of DESIGN.md §1. Each function works on one element (or one row for the loss) so a CPU
// loop or a CUDA thread can call it. All functions are pure apart from their pointer/reference outputs,
// and thread-safe for disjoint outputs. nvcc 13 compiles this header (only <cmath>, <cstdint>).
#pragma once

#include <cmath>
#include <cstdint>

#include "models/host_device.h"

namespace meridian::models::math {

MERIDIAN_HOST_DEVICE inline float relu(float x) { return x > 0.0f ? x : 0.0f; }

// Gradient of ReLU given its output y (y > 0 exactly where the input was > 0) and the upstream dy.
MERIDIAN_HOST_DEVICE inline float relu_backward(float y, float dy) { return y > 0.0f ? dy : 0.0f; }

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

// Heavy-ball momentum (DESIGN.md §1: u ← m·u + g, w ← w − γ·u), PyTorch's convention without
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

// Delayed compensation for parameter mixing (DESIGN.md §1): x ← x + (m − s), where s is the snapshot
// taken at step s and m the mixed value that came back for it; keeps the local progress since s.
MERIDIAN_HOST_DEVICE inline void delayed_compensation(float& x, float mixed, float snapshot) {
  x += mixed - snapshot;
}

}  // namespace meridian::models::math
