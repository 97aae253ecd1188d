// Launchers for the kernels behind CudaBackend (cuda_backend.h): one host function per Backend operation
// that is not a GEMM. Each enqueues its kernel(s) on `stream` and returns at once; all pointers are
// device memory, tensors row-major with the shapes of models/backend.h, where each operation's exact
// meaning is specified (the CPU backend is the reference). The per-element math comes from
// models/elementwise_math.h, the same functions the CPU backend calls.
//
// Reductions (sum, the loss) run in a fixed order, so results are deterministic from run to run. Throws
// meridian::cuda::Error when a launch fails.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "models/backend.h"

namespace meridian::cuda::kernels {

void im2col(cudaStream_t stream, const models::ConvGeometry& g, std::size_t batch, const float* images, float* columns);
void col2im(cudaStream_t stream, const models::ConvGeometry& g, std::size_t batch, const float* columns, float* images);
void sum_channels(cudaStream_t stream, std::size_t batch, std::size_t channels, std::size_t pixels, const float* images,
                  float* sums);
void max_pool_forward(cudaStream_t stream, const models::PoolGeometry& g, std::size_t batch, const float* in,
                      float* out, std::int32_t* argmax);
void max_pool_backward(cudaStream_t stream, const models::PoolGeometry& g, std::size_t batch, const float* dout,
                       const std::int32_t* argmax, float* din);
void broadcast_rows(cudaStream_t stream, std::size_t rows, std::size_t cols, const float* bias, float* out);
void fill_rows(cudaStream_t stream, std::size_t rows, std::size_t cols, const float* values, float* out);
void sum(cudaStream_t stream, std::size_t rows, std::size_t cols, const float* m, bool over_columns, float* sums);
void relu_forward(cudaStream_t stream, std::size_t n, const float* in, float* out);
void relu_backward(cudaStream_t stream, std::size_t n, const float* out, const float* dout, float* din);
void activation_forward(cudaStream_t stream, models::Activation f, std::size_t n, const float* in, float* out);
void activation_backward(cudaStream_t stream, models::Activation f, std::size_t n, const float* in, const float* out,
                         const float* dout, float* din);
void add(cudaStream_t stream, std::size_t n, const float* a, const float* b, float* out);
void batch_norm_forward(cudaStream_t stream, const models::ChannelLayout& l, bool training, const float* in,
                        const float* gamma, const float* beta, float eps, float momentum, float* running_mean,
                        float* running_var, float* mean, float* inv_std, float* out);
void batch_norm_backward(cudaStream_t stream, const models::ChannelLayout& l, bool training, const float* in,
                         const float* dout, const float* gamma, const float* mean, const float* inv_std, float* dgamma,
                         float* dbeta, float* din);
void group_norm_forward(cudaStream_t stream, const models::ChannelLayout& l, std::size_t groups, const float* in,
                        const float* gamma, const float* beta, float eps, float* mean, float* inv_std, float* out);
void group_norm_backward(cudaStream_t stream, const models::ChannelLayout& l, std::size_t groups, const float* in,
                         const float* dout, const float* gamma, const float* mean, const float* inv_std, float* dgamma,
                         float* dbeta, float* din);
void average_pool_forward(cudaStream_t stream, const models::PoolGeometry& g, std::size_t batch, const float* in,
                          float* out);
void average_pool_backward(cudaStream_t stream, const models::PoolGeometry& g, std::size_t batch, const float* dout,
                           float* din);
void global_average_pool_forward(cudaStream_t stream, const models::ChannelLayout& l, const float* in, float* out);
void global_average_pool_backward(cudaStream_t stream, const models::ChannelLayout& l, const float* dout, float* din);
// Dropout forward and backward alike (the backward pass applies the same mask to the gradient).
void dropout(cudaStream_t stream, std::size_t n, float p, std::uint64_t key, const float* in, float* out);
// Per-row losses into row_losses (batch) and dlogits; a row whose label is outside [0, classes) gets a
// NaN loss and untouched dlogits, and the lowest such row index is written to *first_bad_row (which the
// caller initializes to batch).
void softmax_cross_entropy(cudaStream_t stream, std::size_t batch, std::size_t classes, const float* logits,
                           const std::int32_t* labels, float* dlogits, float* row_losses,
                           unsigned long long* first_bad_row);
void argmax_rows(cudaStream_t stream, std::size_t batch, std::size_t classes, const float* logits,
                 std::int32_t* predictions);
void sgd_update(cudaStream_t stream, std::size_t n, float* w, const float* g, float lr, float weight_decay);
void momentum_update(cudaStream_t stream, std::size_t n, float* w, float* u, const float* g, float lr, float momentum,
                     float weight_decay, bool nesterov);
void adam_update(cudaStream_t stream, std::size_t n, float* w, float* m, float* v, const float* g, float lr,
                 float beta1, float beta2, float eps, float weight_decay, float bias_correction1,
                 float bias_correction2);
void push_sum_scale(cudaStream_t stream, std::size_t n, float* x, float share);
void push_sum_add(cudaStream_t stream, std::size_t n, float* x, const float* received);
void delayed_compensation(cudaStream_t stream, std::size_t n, float* x, const float* mixed, const float* snapshot);

}  // namespace meridian::cuda::kernels
