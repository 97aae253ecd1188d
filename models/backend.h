// The compute backend behind every layer, loss and optimizer: GEMM, the per-layer heavy operations and
// the element-wise loops. The CPU backend (cpu_backend.h, OpenBLAS) is the reference; the CUDA backend
// (cuda/cuda_backend.h) implements the same interface with cuBLAS/cuDNN and kernels that call the same
// elementwise_math.h functions.
//
// The backend also owns the memory model: every tensor of a model (parameters, gradients, activations,
// workspaces, optimizer state) is allocated from it (allocate(), BackendBuffer<T>), so a model on the
// CUDA backend lives in device memory and only the batch goes up and the loss and accuracy come down.
// Pointers passed to the operations are to such memory. Tensors are row-major; shapes are given next to
// each argument. A backend object is used by one thread at a time (the trainer thread); it may use worker
// threads internally (set_threads).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "models/backend_memory.h"
#include "models/convolution.h"
#include "models/max_pooling.h"

namespace meridian::models {

// Geometry of a square-kernel 2-D convolution over NCHW images (stride 1 or more, zero padding).
struct ConvGeometry {
  std::size_t in_channels = 0, in_height = 0, in_width = 0;
  std::size_t kernel = 0, stride = 1, padding = 0;
  std::size_t out_height() const { return (in_height + 2 * padding - kernel) / stride + 1; }
  std::size_t out_width() const { return (in_width + 2 * padding - kernel) / stride + 1; }
  std::size_t patch_size() const { return in_channels * kernel * kernel; }  // rows of the column matrix
};

// Geometry of a max pooling window over NCHW images (no padding; windows fit inside the input).
struct PoolGeometry {
  std::size_t channels = 0, in_height = 0, in_width = 0;
  std::size_t window = 2, stride = 2;
  std::size_t out_height() const { return (in_height - window) / stride + 1; }
  std::size_t out_width() const { return (in_width - window) / stride + 1; }
};

// Element-wise activations other than ReLU (elementwise_math.h has the exact formulas).
enum class Activation { gelu, tanh, sigmoid };

// Layout of a tensor (batch, channels, pixels) for the normalization and pooling operations, pixels being
// height · width (1 for a vector of features).
struct ChannelLayout {
  std::size_t batch = 0, channels = 0, pixels = 1;
  std::size_t size() const { return batch * channels * pixels; }
};

class Backend {
 public:
  virtual ~Backend() = default;

  virtual std::string name() const = 0;
  // Worker threads used by the backend's heavy operations (GEMM, im2col). threads >= 1.
  virtual void set_threads(int threads) = 0;
  virtual int threads() const = 0;
  // Makes the backend usable from the calling thread: call first on a thread other than the one that
  // constructed it (the CUDA backend makes its device current there). No-op on the CPU.
  virtual void use_on_this_thread() {}

  // --- memory ---
  // True when the operations' memory is ordinary host memory (the CPU backend): callers may then read
  // and write a model's buffers directly instead of through copy_to_host/copy_from_host.
  virtual bool host_addressable() const = 0;
  // `bytes` of zeroed memory that the operations can address. The result must not outlive the backend.
  // Throws std::bad_alloc (host) or the backend's error type when memory is exhausted.
  virtual std::unique_ptr<BackendMemory> allocate(std::size_t bytes) = 0;
  // dst (backend memory) ← host, ordered after every operation enqueued before; `host` may be reused as
  // soon as the call returns.
  virtual void copy_from_host(void* dst, const void* host, std::size_t bytes) = 0;
  // host ← src (backend memory), after every operation enqueued before; returns when `host` holds it.
  virtual void copy_to_host(void* host, const void* src, std::size_t bytes) = 0;
  // dst ← src, both backend memory, not overlapping.
  virtual void copy(void* dst, const void* src, std::size_t bytes) = 0;

  // --- layer-level operations ---
  // The convolution of one layer with geometry `g` and `out_channels` filters, and a max pooling with
  // geometry `g` (convolution.h, max_pooling.h). The result must not outlive the backend.
  virtual std::unique_ptr<Convolution> make_convolution(const ConvGeometry& g, std::size_t out_channels) = 0;
  virtual std::unique_ptr<MaxPooling> make_max_pooling(const PoolGeometry& g) = 0;

  // C (m, n) = alpha · op(A) · op(B) + beta · C, row-major; op(A) is (m, k), op(B) is (k, n).
  virtual void gemm(bool transpose_a, bool transpose_b, std::size_t m, std::size_t n, std::size_t k, float alpha,
                    const float* a, std::size_t lda, const float* b, std::size_t ldb, float beta, float* c,
                    std::size_t ldc) = 0;

  // --- the building blocks below are what the CPU's layer-level operations are made of ---
  // Convolution as GEMM. The column matrix is (patch_size, batch · out_h · out_w): column
  // (b, oy, ox) holds the input patch that produces output pixel (oy, ox) of image b.
  virtual void im2col(const ConvGeometry& g, std::size_t batch, const float* images, float* columns) = 0;
  // Adds the columns back onto the images (the transpose of im2col); overwrites `images`.
  virtual void col2im(const ConvGeometry& g, std::size_t batch, const float* columns, float* images) = 0;
  // sums (channels) = Σ over images and pixels of images (batch, channels, pixels): a conv bias gradient.
  virtual void sum_channels(std::size_t batch, std::size_t channels, std::size_t pixels, const float* images,
                            float* sums) = 0;

  // out (batch, channels, out_h, out_w) = window maxima of in; argmax records the input offset chosen.
  virtual void max_pool_forward(const PoolGeometry& g, std::size_t batch, const float* in, float* out,
                                std::int32_t* argmax) = 0;
  // din (batch, channels, in_h, in_w) = dout routed back to the argmax positions (others zero).
  virtual void max_pool_backward(const PoolGeometry& g, std::size_t batch, const float* dout,
                                 const std::int32_t* argmax, float* din) = 0;

  // out (rows, cols) = bias (cols) broadcast over rows.
  virtual void broadcast_rows(std::size_t rows, std::size_t cols, const float* bias, float* out) = 0;
  // out (rows, cols) = values[row] in every column of each row (a conv bias over an image's channels).
  virtual void fill_rows(std::size_t rows, std::size_t cols, const float* values, float* out) = 0;
  // sums (cols) = Σ_rows m (rows, cols), or with `over_columns` sums (rows) = Σ_cols m.
  virtual void sum(std::size_t rows, std::size_t cols, const float* m, bool over_columns, float* sums) = 0;

  virtual void relu_forward(std::size_t n, const float* in, float* out) = 0;
  virtual void relu_backward(std::size_t n, const float* out, const float* dout, float* din) = 0;

  // out = f(in) element-wise; din = f'(in) ⊙ dout, given the in and out of that forward.
  virtual void activation_forward(Activation f, std::size_t n, const float* in, float* out) = 0;
  virtual void activation_backward(Activation f, std::size_t n, const float* in, const float* out, const float* dout,
                                   float* din) = 0;
  // out = a + b element-wise (a residual block's sum); out may be a or b.
  virtual void add(std::size_t n, const float* a, const float* b, float* out) = 0;

  // Batch normalization of in (l.batch, l.channels, l.pixels) per channel, as torch.nn.BatchNorm1d/2d:
  // out = γ·(in − mean)·inv_std + β with inv_std = 1/√(var + eps). With `training` the statistics are the
  // batch's (mean and biased variance over batch and pixels), and the running statistics move towards
  // them: running_mean ← (1 − momentum)·running_mean + momentum·mean and the same for running_var with the
  // unbiased variance. Without `training` the running statistics are used and left unchanged. Either way
  // the statistics used are written to mean and inv_std (channels) for the backward pass.
  virtual void batch_norm_forward(const ChannelLayout& l, bool training, const float* in, const float* gamma,
                                  const float* beta, float eps, float momentum, float* running_mean, float* running_var,
                                  float* mean, float* inv_std, float* out) = 0;
  // Overwrites dgamma and dbeta (channels) and, unless din is null, din from dout, for a forward with the
  // same `training`, in, gamma and the mean/inv_std it wrote (with `training` the statistics depend on
  // the input, and din carries that dependence).
  virtual void batch_norm_backward(const ChannelLayout& l, bool training, const float* in, const float* dout,
                                   const float* gamma, const float* mean, const float* inv_std, float* dgamma,
                                   float* dbeta, float* din) = 0;
  // Group normalization, as torch.nn.GroupNorm: each sample's channels fall into `groups` groups of
  // l.channels / groups consecutive channels, normalized by the mean and biased variance of the group's
  // values; γ, β are per channel. mean and inv_std are (batch, groups).
  virtual void group_norm_forward(const ChannelLayout& l, std::size_t groups, const float* in, const float* gamma,
                                  const float* beta, float eps, float* mean, float* inv_std, float* out) = 0;
  virtual void group_norm_backward(const ChannelLayout& l, std::size_t groups, const float* in, const float* dout,
                                   const float* gamma, const float* mean, const float* inv_std, float* dgamma,
                                   float* dbeta, float* din) = 0;

  // Average pooling with geometry g (torch.nn.AvgPool2d, no padding): out (batch, channels, out_h, out_w) =
  // window means of in; din = each output gradient spread evenly over its window (summed where windows
  // overlap).
  virtual void average_pool_forward(const PoolGeometry& g, std::size_t batch, const float* in, float* out) = 0;
  virtual void average_pool_backward(const PoolGeometry& g, std::size_t batch, const float* dout, float* din) = 0;
  // Global average pooling: out (batch, channels) = the mean over pixels of in (l); din = dout / pixels.
  virtual void global_average_pool_forward(const ChannelLayout& l, const float* in, float* out) = 0;
  virtual void global_average_pool_backward(const ChannelLayout& l, const float* dout, float* din) = 0;

  // Inverted dropout of n elements with drop probability p in [0, 1): element i is kept where
  // math::dropout_keep(key, i, p) and then scaled by 1/(1 − p). The backward pass draws the same mask from
  // the same key.
  virtual void dropout_forward(std::size_t n, float p, std::uint64_t key, const float* in, float* out) = 0;
  virtual void dropout_backward(std::size_t n, float p, std::uint64_t key, const float* dout, float* din) = 0;

  // Mean softmax cross-entropy of logits (batch, classes) against labels (batch); writes dlogits, the
  // gradient of the mean. Throws error::UserError for a label outside [0, classes).
  virtual float softmax_cross_entropy(std::size_t batch, std::size_t classes, const float* logits,
                                      const std::int32_t* labels, float* dlogits) = 0;
  // predictions (batch) = argmax over each row of logits (batch, classes).
  virtual void argmax_rows(std::size_t batch, std::size_t classes, const float* logits, std::int32_t* predictions) = 0;

  // Optimizer updates over n parameters (see elementwise_math.h for the exact rules).
  virtual void sgd_update(std::size_t n, float* w, const float* g, float lr, float weight_decay) = 0;
  virtual void momentum_update(std::size_t n, float* w, float* u, const float* g, float lr, float momentum,
                               float weight_decay, bool nesterov) = 0;
  virtual void adam_update(std::size_t n, float* w, float* m, float* v, const float* g, float lr, float beta1,
                           float beta2, float eps, float weight_decay, float bias_correction1,
                           float bias_correction2) = 0;

  // Mixing primitives used by gossip/: x ← s·x, x ← x + y, x ← x + (mixed − snapshot).
  virtual void push_sum_scale(std::size_t n, float* x, float share) = 0;
  virtual void push_sum_add(std::size_t n, float* x, const float* received) = 0;
  virtual void delayed_compensation(std::size_t n, float* x, const float* mixed, const float* snapshot) = 0;
};

}  // namespace meridian::models
