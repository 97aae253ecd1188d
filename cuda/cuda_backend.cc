#include "cuda/cuda_backend.h"

#include <climits>
#include <stdexcept>

#include "cuda/cudnn_convolution.h"
#include "cuda/cudnn_max_pooling.h"
#include "cuda/device_properties.h"
#include "cuda/error.h"
#include "cuda/gemm.h"
#include "cuda/kernels.h"
#include "error/error.h"

namespace meridian::cuda {

namespace {

// cuBLAS takes int sizes; a model whose matrices exceed them is not something to truncate silently.
int to_int(std::size_t value, const char* what) {
  if (value > static_cast<std::size_t>(INT_MAX)) {
    throw error::InternalError(std::string("CudaBackend::gemm: ") + what + " = " + std::to_string(value) +
                               " exceeds cuBLAS's int range");
  }
  return static_cast<int>(value);
}

// Makes the device current before the members (stream, handle, buffers) are created on it.
int enter_device(int index) {
  use_device(index);
  return index;
}

}  // namespace

CudaBackend::CudaBackend(int device_index)
    : device_(enter_device(device_index)), blas_(stream_.get()), first_bad_row_(1), host_first_bad_row_(1) {}

void CudaBackend::use_on_this_thread() { use_device(device_); }

void CudaBackend::set_threads(int threads) {
  if (threads < 1) throw error::UserError("CudaBackend: threads must be >= 1, got " + std::to_string(threads));
  threads_ = threads;
}

namespace {

// Device memory zeroed on the backend's stream, so the zeros are in place before any later operation.
class DeviceMemory final : public models::BackendMemory {
 public:
  DeviceMemory(std::size_t bytes, cudaStream_t stream) : buffer_(bytes) { buffer_.zero(stream); }
  void* data() noexcept override { return buffer_.data(); }
  std::size_t bytes() const noexcept override { return buffer_.size(); }

 private:
  DeviceBuffer<std::byte> buffer_;
};

}  // namespace

std::unique_ptr<models::BackendMemory> CudaBackend::allocate(std::size_t bytes) {
  return std::make_unique<DeviceMemory>(bytes, stream());
}

void CudaBackend::copy_from_host(void* dst, const void* host, std::size_t bytes) {
  // From pageable memory the runtime stages `host` before returning, so the caller may reuse it at once.
  if (bytes > 0) MERIDIAN_CUDA_CHECK(cudaMemcpyAsync(dst, host, bytes, cudaMemcpyHostToDevice, stream()));
}

void CudaBackend::copy_to_host(void* host, const void* src, std::size_t bytes) {
  if (bytes == 0) return;
  MERIDIAN_CUDA_CHECK(cudaMemcpyAsync(host, src, bytes, cudaMemcpyDeviceToHost, stream()));
  synchronize();
}

void CudaBackend::copy(void* dst, const void* src, std::size_t bytes) {
  if (bytes > 0) MERIDIAN_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream()));
}

cudnnHandle_t CudaBackend::dnn() {
  if (!dnn_) dnn_.emplace(stream());
  return dnn_->get();
}

std::unique_ptr<models::Convolution> CudaBackend::make_convolution(const models::ConvGeometry& g,
                                                                   std::size_t out_channels) {
  return std::make_unique<CudnnConvolution>(dnn(), stream(), g, out_channels);
}

std::unique_ptr<models::MaxPooling> CudaBackend::make_max_pooling(const models::PoolGeometry& g) {
  return std::make_unique<CudnnMaxPooling>(dnn(), g);
}

void CudaBackend::gemm(bool transpose_a, bool transpose_b, std::size_t m, std::size_t n, std::size_t k, float alpha,
                       const float* a, std::size_t lda, const float* b, std::size_t ldb, float beta, float* c,
                       std::size_t ldc) {
  cuda::gemm(blas_.get(), transpose_a ? Transpose::kYes : Transpose::kNo,
             transpose_b ? Transpose::kYes : Transpose::kNo, to_int(m, "m"), to_int(n, "n"), to_int(k, "k"), alpha, a,
             to_int(lda, "lda"), b, to_int(ldb, "ldb"), beta, c, to_int(ldc, "ldc"));
}

void CudaBackend::im2col(const models::ConvGeometry& g, std::size_t batch, const float* images, float* columns) {
  kernels::im2col(stream(), g, batch, images, columns);
}

void CudaBackend::col2im(const models::ConvGeometry& g, std::size_t batch, const float* columns, float* images) {
  kernels::col2im(stream(), g, batch, columns, images);
}

void CudaBackend::sum_channels(std::size_t batch, std::size_t channels, std::size_t pixels, const float* images,
                               float* sums) {
  kernels::sum_channels(stream(), batch, channels, pixels, images, sums);
}

void CudaBackend::max_pool_forward(const models::PoolGeometry& g, std::size_t batch, const float* in, float* out,
                                   std::int32_t* argmax) {
  kernels::max_pool_forward(stream(), g, batch, in, out, argmax);
}

void CudaBackend::max_pool_backward(const models::PoolGeometry& g, std::size_t batch, const float* dout,
                                    const std::int32_t* argmax, float* din) {
  kernels::max_pool_backward(stream(), g, batch, dout, argmax, din);
}

void CudaBackend::broadcast_rows(std::size_t rows, std::size_t cols, const float* bias, float* out) {
  kernels::broadcast_rows(stream(), rows, cols, bias, out);
}

void CudaBackend::fill_rows(std::size_t rows, std::size_t cols, const float* values, float* out) {
  kernels::fill_rows(stream(), rows, cols, values, out);
}

void CudaBackend::sum(std::size_t rows, std::size_t cols, const float* m, bool over_columns, float* sums) {
  kernels::sum(stream(), rows, cols, m, over_columns, sums);
}

void CudaBackend::relu_forward(std::size_t n, const float* in, float* out) {
  kernels::relu_forward(stream(), n, in, out);
}

void CudaBackend::relu_backward(std::size_t n, const float* out, const float* dout, float* din) {
  kernels::relu_backward(stream(), n, out, dout, din);
}

void CudaBackend::activation_forward(models::Activation f, std::size_t n, const float* in, float* out) {
  kernels::activation_forward(stream(), f, n, in, out);
}

void CudaBackend::activation_backward(models::Activation f, std::size_t n, const float* in, const float* out,
                                      const float* dout, float* din) {
  kernels::activation_backward(stream(), f, n, in, out, dout, din);
}

void CudaBackend::add(std::size_t n, const float* a, const float* b, float* out) {
  kernels::add(stream(), n, a, b, out);
}

void CudaBackend::batch_norm_forward(const models::ChannelLayout& l, bool training, const float* in, const float* gamma,
                                     const float* beta, float eps, float momentum, float* running_mean,
                                     float* running_var, float* mean, float* inv_std, float* out) {
  kernels::batch_norm_forward(stream(), l, training, in, gamma, beta, eps, momentum, running_mean, running_var, mean,
                              inv_std, out);
}

void CudaBackend::batch_norm_backward(const models::ChannelLayout& l, bool training, const float* in, const float* dout,
                                      const float* gamma, const float* mean, const float* inv_std, float* dgamma,
                                      float* dbeta, float* din) {
  kernels::batch_norm_backward(stream(), l, training, in, dout, gamma, mean, inv_std, dgamma, dbeta, din);
}

void CudaBackend::group_norm_forward(const models::ChannelLayout& l, std::size_t groups, const float* in,
                                     const float* gamma, const float* beta, float eps, float* mean, float* inv_std,
                                     float* out) {
  kernels::group_norm_forward(stream(), l, groups, in, gamma, beta, eps, mean, inv_std, out);
}

void CudaBackend::group_norm_backward(const models::ChannelLayout& l, std::size_t groups, const float* in,
                                      const float* dout, const float* gamma, const float* mean, const float* inv_std,
                                      float* dgamma, float* dbeta, float* din) {
  kernels::group_norm_backward(stream(), l, groups, in, dout, gamma, mean, inv_std, dgamma, dbeta, din);
}

void CudaBackend::average_pool_forward(const models::PoolGeometry& g, std::size_t batch, const float* in, float* out) {
  kernels::average_pool_forward(stream(), g, batch, in, out);
}

void CudaBackend::average_pool_backward(const models::PoolGeometry& g, std::size_t batch, const float* dout,
                                        float* din) {
  kernels::average_pool_backward(stream(), g, batch, dout, din);
}

void CudaBackend::global_average_pool_forward(const models::ChannelLayout& l, const float* in, float* out) {
  kernels::global_average_pool_forward(stream(), l, in, out);
}

void CudaBackend::global_average_pool_backward(const models::ChannelLayout& l, const float* dout, float* din) {
  kernels::global_average_pool_backward(stream(), l, dout, din);
}

void CudaBackend::dropout_forward(std::size_t n, float p, std::uint64_t key, const float* in, float* out) {
  kernels::dropout(stream(), n, p, key, in, out);
}

void CudaBackend::dropout_backward(std::size_t n, float p, std::uint64_t key, const float* dout, float* din) {
  kernels::dropout(stream(), n, p, key, dout, din);
}

float CudaBackend::softmax_cross_entropy(std::size_t batch, std::size_t classes, const float* logits,
                                         const std::int32_t* labels, float* dlogits) {
  if (batch == 0) return 0.0f;
  if (row_losses_.size() < batch) {
    // Grows to the largest batch once; every later step reuses the buffers.
    row_losses_ = DeviceBuffer<float>(batch);
    host_row_losses_ = PinnedBuffer<float>(batch);
  }
  host_first_bad_row_.data()[0] = batch;
  MERIDIAN_CUDA_CHECK(cudaMemcpyAsync(first_bad_row_.data(), host_first_bad_row_.data(), sizeof(unsigned long long),
                                      cudaMemcpyHostToDevice, stream()));
  kernels::softmax_cross_entropy(stream(), batch, classes, logits, labels, dlogits, row_losses_.data(),
                                 first_bad_row_.data());
  MERIDIAN_CUDA_CHECK(cudaMemcpyAsync(host_row_losses_.data(), row_losses_.data(), batch * sizeof(float),
                                      cudaMemcpyDeviceToHost, stream()));
  MERIDIAN_CUDA_CHECK(cudaMemcpyAsync(host_first_bad_row_.data(), first_bad_row_.data(), sizeof(unsigned long long),
                                      cudaMemcpyDeviceToHost, stream()));
  synchronize();
  const unsigned long long bad = host_first_bad_row_.data()[0];
  if (bad < batch) {
    std::int32_t label = 0;
    MERIDIAN_CUDA_CHECK(cudaMemcpy(&label, labels + bad, sizeof label, cudaMemcpyDeviceToHost));
    throw error::UserError("softmax_cross_entropy: label " + std::to_string(label) + " of sample " +
                           std::to_string(bad) + " is outside [0, " + std::to_string(classes) + ")");
  }
  // The mean in double over the rows in order, exactly as the CPU backend forms it.
  double total = 0.0;
  for (std::size_t b = 0; b < batch; ++b) total += host_row_losses_.data()[b];
  return static_cast<float>(total / static_cast<double>(batch));
}

void CudaBackend::argmax_rows(std::size_t batch, std::size_t classes, const float* logits, std::int32_t* predictions) {
  kernels::argmax_rows(stream(), batch, classes, logits, predictions);
}

void CudaBackend::sgd_update(std::size_t n, float* w, const float* g, float lr, float weight_decay) {
  kernels::sgd_update(stream(), n, w, g, lr, weight_decay);
}

void CudaBackend::momentum_update(std::size_t n, float* w, float* u, const float* g, float lr, float momentum,
                                  float weight_decay, bool nesterov) {
  kernels::momentum_update(stream(), n, w, u, g, lr, momentum, weight_decay, nesterov);
}

void CudaBackend::adam_update(std::size_t n, float* w, float* m, float* v, const float* g, float lr, float beta1,
                              float beta2, float eps, float weight_decay, float bias_correction1,
                              float bias_correction2) {
  kernels::adam_update(stream(), n, w, m, v, g, lr, beta1, beta2, eps, weight_decay, bias_correction1,
                       bias_correction2);
}

void CudaBackend::push_sum_scale(std::size_t n, float* x, float share) {
  kernels::push_sum_scale(stream(), n, x, share);
}

void CudaBackend::push_sum_add(std::size_t n, float* x, const float* received) {
  kernels::push_sum_add(stream(), n, x, received);
}

void CudaBackend::delayed_compensation(std::size_t n, float* x, const float* mixed, const float* snapshot) {
  kernels::delayed_compensation(stream(), n, x, mixed, snapshot);
}

}  // namespace meridian::cuda
