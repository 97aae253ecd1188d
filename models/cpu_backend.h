// The CPU backend: OpenBLAS sgemm for GEMM and plain loops (calling elementwise_math.h) for the rest;
// its memory is ordinary host memory, its convolutions the implicit GEMM of implicit_gemm_convolution.h
// on a CPU with AVX2 and FMA and im2col + GEMM (im2col_convolution.h) on others, and its max pooling an argmax record
// (argmax_max_pooling.h). It is the reference the CUDA backend is checked against. Not thread-safe: one trainer thread
// uses it; set_threads sets OpenBLAS's worker count, which is process-wide in OpenBLAS.
#pragma once

#include "models/backend.h"

namespace meridian::models {

class CpuBackend final : public Backend {
 public:
  // threads >= 1: OpenBLAS worker threads (process-wide setting).
  explicit CpuBackend(int threads = 1);

  std::string name() const override { return "cpu"; }
  void set_threads(int threads) override;
  int threads() const override { return threads_; }

  bool host_addressable() const override { return true; }
  std::unique_ptr<BackendMemory> allocate(std::size_t bytes) override;
  void copy_from_host(void* dst, const void* host, std::size_t bytes) override;
  void copy_to_host(void* host, const void* src, std::size_t bytes) override;
  void copy(void* dst, const void* src, std::size_t bytes) override;
  std::unique_ptr<Convolution> make_convolution(const ConvGeometry& g, std::size_t out_channels) override;
  std::unique_ptr<MaxPooling> make_max_pooling(const PoolGeometry& g) override;

  void gemm(bool transpose_a, bool transpose_b, std::size_t m, std::size_t n, std::size_t k, float alpha,
            const float* a, std::size_t lda, const float* b, std::size_t ldb, float beta, float* c,
            std::size_t ldc) override;
  void im2col(const ConvGeometry& g, std::size_t batch, const float* images, float* columns) override;
  void col2im(const ConvGeometry& g, std::size_t batch, const float* columns, float* images) override;
  void sum_channels(std::size_t batch, std::size_t channels, std::size_t pixels, const float* images,
                    float* sums) override;
  void max_pool_forward(const PoolGeometry& g, std::size_t batch, const float* in, float* out,
                        std::int32_t* argmax) override;
  void max_pool_backward(const PoolGeometry& g, std::size_t batch, const float* dout, const std::int32_t* argmax,
                         float* din) override;
  void broadcast_rows(std::size_t rows, std::size_t cols, const float* bias, float* out) override;
  void fill_rows(std::size_t rows, std::size_t cols, const float* values, float* out) override;
  void sum(std::size_t rows, std::size_t cols, const float* m, bool over_columns, float* sums) override;
  void relu_forward(std::size_t n, const float* in, float* out) override;
  void relu_backward(std::size_t n, const float* out, const float* dout, float* din) override;
  void activation_forward(Activation f, std::size_t n, const float* in, float* out) override;
  void activation_backward(Activation f, std::size_t n, const float* in, const float* out, const float* dout,
                           float* din) override;
  void add(std::size_t n, const float* a, const float* b, float* out) override;
  void batch_norm_forward(const ChannelLayout& l, bool training, const float* in, const float* gamma, const float* beta,
                          float eps, float momentum, float* running_mean, float* running_var, float* mean,
                          float* inv_std, float* out) override;
  void batch_norm_backward(const ChannelLayout& l, bool training, const float* in, const float* dout,
                           const float* gamma, const float* mean, const float* inv_std, float* dgamma, float* dbeta,
                           float* din) override;
  void group_norm_forward(const ChannelLayout& l, std::size_t groups, const float* in, const float* gamma,
                          const float* beta, float eps, float* mean, float* inv_std, float* out) override;
  void group_norm_backward(const ChannelLayout& l, std::size_t groups, const float* in, const float* dout,
                           const float* gamma, const float* mean, const float* inv_std, float* dgamma, float* dbeta,
                           float* din) override;
  void average_pool_forward(const PoolGeometry& g, std::size_t batch, const float* in, float* out) override;
  void average_pool_backward(const PoolGeometry& g, std::size_t batch, const float* dout, float* din) override;
  void global_average_pool_forward(const ChannelLayout& l, const float* in, float* out) override;
  void global_average_pool_backward(const ChannelLayout& l, const float* dout, float* din) override;
  void dropout_forward(std::size_t n, float p, std::uint64_t key, const float* in, float* out) override;
  void dropout_backward(std::size_t n, float p, std::uint64_t key, const float* dout, float* din) override;
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

 private:
  int threads_ = 1;
};

}  // namespace meridian::models
