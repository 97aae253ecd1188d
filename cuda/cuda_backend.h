// The CUDA implementation of models::Backend: GEMM on cuBLAS (full fp32, no TF32), convolution and max
// pooling layers on cuDNN (cudnn_convolution.h, cudnn_max_pooling.h), everything else as kernels
// (cuda/kernels.cu) that call the per-element math of models/elementwise_math.h, the same functions the
// CPU backend runs. Its memory (allocate) is device memory, so a whole models::Model runs on the device. All work is
// enqueued on the backend's one stream in call order, so the operations of a step need no synchronization between them;
// only softmax_cross_entropy, which returns the loss to the host, waits for the stream.
//
// Memory: every pointer passed in is device memory on this backend's device (from allocate(), or a
// DeviceBuffer). copy_to_host waits for the stream; copy_from_host and copy are enqueued on it.
//
// Ownership: owns its stream, cuBLAS handle, cuDNN handle (made at the first convolution or pooling) and
// the small loss workspace (grown to the largest batch, then reused). Memory, convolutions and poolings it
// made must be destroyed before it. Thread safety: one thread at a time (the trainer), like every Backend; the
// constructor makes the device current for the calling thread. Throws meridian::cuda::Error when CUDA fails
// (construction fails that way on a machine without a usable device).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "cuda/blas_handle.h"
#include "cuda/device_buffer.h"
#include "cuda/dnn_handle.h"
#include "cuda/pinned_buffer.h"
#include "cuda/stream.h"
#include "models/backend.h"

namespace meridian::cuda {

class CudaBackend final : public models::Backend {
 public:
  explicit CudaBackend(int device_index = 0);

  std::string name() const override { return "cuda:" + std::to_string(device_); }
  // The GPU does not use host worker threads; the value is kept (>= 1) so callers see what they set.
  void set_threads(int threads) override;
  int threads() const override { return threads_; }
  void use_on_this_thread() override;

  bool host_addressable() const override { return false; }
  std::unique_ptr<models::BackendMemory> allocate(std::size_t bytes) override;
  void copy_from_host(void* dst, const void* host, std::size_t bytes) override;
  void copy_to_host(void* host, const void* src, std::size_t bytes) override;
  void copy(void* dst, const void* src, std::size_t bytes) override;
  std::unique_ptr<models::Convolution> make_convolution(const models::ConvGeometry& g,
                                                        std::size_t out_channels) override;
  std::unique_ptr<models::MaxPooling> make_max_pooling(const models::PoolGeometry& g) override;

  void gemm(bool transpose_a, bool transpose_b, std::size_t m, std::size_t n, std::size_t k, float alpha,
            const float* a, std::size_t lda, const float* b, std::size_t ldb, float beta, float* c,
            std::size_t ldc) override;
  void im2col(const models::ConvGeometry& g, std::size_t batch, const float* images, float* columns) override;
  void col2im(const models::ConvGeometry& g, std::size_t batch, const float* columns, float* images) override;
  void sum_channels(std::size_t batch, std::size_t channels, std::size_t pixels, const float* images,
                    float* sums) override;
  void max_pool_forward(const models::PoolGeometry& g, std::size_t batch, const float* in, float* out,
                        std::int32_t* argmax) override;
  void max_pool_backward(const models::PoolGeometry& g, std::size_t batch, const float* dout,
                         const std::int32_t* argmax, float* din) override;
  void broadcast_rows(std::size_t rows, std::size_t cols, const float* bias, float* out) override;
  void fill_rows(std::size_t rows, std::size_t cols, const float* values, float* out) override;
  void sum(std::size_t rows, std::size_t cols, const float* m, bool over_columns, float* sums) override;
  void relu_forward(std::size_t n, const float* in, float* out) override;
  void relu_backward(std::size_t n, const float* out, const float* dout, float* din) override;
  void activation_forward(models::Activation f, std::size_t n, const float* in, float* out) override;
  void activation_backward(models::Activation f, std::size_t n, const float* in, const float* out, const float* dout,
                           float* din) override;
  void add(std::size_t n, const float* a, const float* b, float* out) override;
  void batch_norm_forward(const models::ChannelLayout& l, bool training, const float* in, const float* gamma,
                          const float* beta, float eps, float momentum, float* running_mean, float* running_var,
                          float* mean, float* inv_std, float* out) override;
  void batch_norm_backward(const models::ChannelLayout& l, bool training, const float* in, const float* dout,
                           const float* gamma, const float* mean, const float* inv_std, float* dgamma, float* dbeta,
                           float* din) override;
  void group_norm_forward(const models::ChannelLayout& l, std::size_t groups, const float* in, const float* gamma,
                          const float* beta, float eps, float* mean, float* inv_std, float* out) override;
  void group_norm_backward(const models::ChannelLayout& l, std::size_t groups, const float* in, const float* dout,
                           const float* gamma, const float* mean, const float* inv_std, float* dgamma, float* dbeta,
                           float* din) override;
  void average_pool_forward(const models::PoolGeometry& g, std::size_t batch, const float* in, float* out) override;
  void average_pool_backward(const models::PoolGeometry& g, std::size_t batch, const float* dout, float* din) override;
  void global_average_pool_forward(const models::ChannelLayout& l, const float* in, float* out) override;
  void global_average_pool_backward(const models::ChannelLayout& l, const float* dout, float* din) override;
  void dropout_forward(std::size_t n, float p, std::uint64_t key, const float* in, float* out) override;
  void dropout_backward(std::size_t n, float p, std::uint64_t key, const float* dout, float* din) override;
  // Waits for the stream. Throws error::UserError, as the CPU backend, for a label outside [0, classes).
  float softmax_cross_entropy(std::size_t batch, std::size_t classes, const float* logits, const std::int32_t* labels,
                              float* dlogits) override;
  void argmax_rows(std::size_t batch, std::size_t classes, const float* logits, std::int32_t* predictions) override;
  void sgd_update(std::size_t n, float* w, const float* g, float lr, float weight_decay) override;
  void momentum_update(std::size_t n, float* w, float* u, const float* g, float lr, float momentum, float weight_decay,
                       bool nesterov) override;
  void adam_update(std::size_t n, float* w, float* m, float* v, const float* g, float lr, float beta1, float beta2,
                   float eps, float weight_decay, float bias_correction1, float bias_correction2) override;
  void push_sum_scale(std::size_t n, float* x, float share) override;
  void push_sum_add(std::size_t n, float* x, const float* received) override;
  void delayed_compensation(std::size_t n, float* x, const float* mixed, const float* snapshot) override;

  int device() const noexcept { return device_; }
  // The stream every operation is enqueued on (for copies and ParameterSnapshot).
  cudaStream_t stream() const noexcept { return stream_.get(); }
  // Blocks until every enqueued operation has finished; throws Error on an asynchronous failure.
  void synchronize() const { stream_.synchronize(); }
  // The cuDNN handle on stream(), made at the first call.
  cudnnHandle_t dnn();

 private:
  int device_;
  int threads_ = 1;
  Stream stream_;
  BlasHandle blas_;
  std::optional<DnnHandle> dnn_;
  DeviceBuffer<float> row_losses_;                  // (batch)
  DeviceBuffer<unsigned long long> first_bad_row_;  // (1)
  PinnedBuffer<float> host_row_losses_;             // (batch)
  PinnedBuffer<unsigned long long> host_first_bad_row_;
};

}  // namespace meridian::cuda
