#include "cuda/dnn_descriptors.h"

#include <climits>
#include <stdexcept>
#include <string>
#include <utility>

#include "cuda/error.h"
#include "error/error.h"

namespace meridian::cuda {

namespace {

int dim(std::size_t value, const char* what) {
  if (value > static_cast<std::size_t>(INT_MAX))
    throw error::InternalError(std::string("cuDNN descriptor: ") + what + " = " + std::to_string(value) +
                               " exceeds cuDNN's int range");
  return static_cast<int>(value);
}

}  // namespace

TensorDescriptor::TensorDescriptor() { MERIDIAN_CUDNN_CHECK(cudnnCreateTensorDescriptor(&desc_)); }
TensorDescriptor::~TensorDescriptor() {
  if (desc_ != nullptr) (void)cudnnDestroyTensorDescriptor(desc_);
}
TensorDescriptor::TensorDescriptor(TensorDescriptor&& other) noexcept : desc_(std::exchange(other.desc_, nullptr)) {}
TensorDescriptor& TensorDescriptor::operator=(TensorDescriptor&& other) noexcept {
  std::swap(desc_, other.desc_);
  return *this;
}
void TensorDescriptor::set(std::size_t n, std::size_t c, std::size_t h, std::size_t w) {
  MERIDIAN_CUDNN_CHECK(cudnnSetTensor4dDescriptor(desc_, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, dim(n, "n"), dim(c, "c"),
                                                  dim(h, "h"), dim(w, "w")));
}

FilterDescriptor::FilterDescriptor(std::size_t out_channels, std::size_t in_channels, std::size_t kernel) {
  MERIDIAN_CUDNN_CHECK(cudnnCreateFilterDescriptor(&desc_));
  try {
    MERIDIAN_CUDNN_CHECK(cudnnSetFilter4dDescriptor(desc_, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW,
                                                    dim(out_channels, "out_channels"), dim(in_channels, "in_channels"),
                                                    dim(kernel, "kernel"), dim(kernel, "kernel")));
  } catch (...) {
    (void)cudnnDestroyFilterDescriptor(desc_);
    throw;
  }
}
FilterDescriptor::~FilterDescriptor() {
  if (desc_ != nullptr) (void)cudnnDestroyFilterDescriptor(desc_);
}
FilterDescriptor::FilterDescriptor(FilterDescriptor&& other) noexcept : desc_(std::exchange(other.desc_, nullptr)) {}
FilterDescriptor& FilterDescriptor::operator=(FilterDescriptor&& other) noexcept {
  std::swap(desc_, other.desc_);
  return *this;
}

ConvolutionDescriptor::ConvolutionDescriptor(std::size_t padding, std::size_t stride) {
  MERIDIAN_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&desc_));
  try {
    const int pad = dim(padding, "padding"), step = dim(stride, "stride");
    MERIDIAN_CUDNN_CHECK(
        cudnnSetConvolution2dDescriptor(desc_, pad, pad, step, step, 1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    // CUDNN_DEFAULT_MATH would allow TF32 on Ampere and later: 10-bit mantissas, outside the parity bounds.
    MERIDIAN_CUDNN_CHECK(cudnnSetConvolutionMathType(desc_, CUDNN_FMA_MATH));
  } catch (...) {
    (void)cudnnDestroyConvolutionDescriptor(desc_);
    throw;
  }
}
ConvolutionDescriptor::~ConvolutionDescriptor() {
  if (desc_ != nullptr) (void)cudnnDestroyConvolutionDescriptor(desc_);
}
ConvolutionDescriptor::ConvolutionDescriptor(ConvolutionDescriptor&& other) noexcept
    : desc_(std::exchange(other.desc_, nullptr)) {}
ConvolutionDescriptor& ConvolutionDescriptor::operator=(ConvolutionDescriptor&& other) noexcept {
  std::swap(desc_, other.desc_);
  return *this;
}

PoolingDescriptor::PoolingDescriptor(std::size_t window, std::size_t stride) {
  MERIDIAN_CUDNN_CHECK(cudnnCreatePoolingDescriptor(&desc_));
  try {
    const int w = dim(window, "window"), s = dim(stride, "stride");
    MERIDIAN_CUDNN_CHECK(
        cudnnSetPooling2dDescriptor(desc_, CUDNN_POOLING_MAX_DETERMINISTIC, CUDNN_NOT_PROPAGATE_NAN, w, w, 0, 0, s, s));
  } catch (...) {
    (void)cudnnDestroyPoolingDescriptor(desc_);
    throw;
  }
}
PoolingDescriptor::~PoolingDescriptor() {
  if (desc_ != nullptr) (void)cudnnDestroyPoolingDescriptor(desc_);
}
PoolingDescriptor::PoolingDescriptor(PoolingDescriptor&& other) noexcept : desc_(std::exchange(other.desc_, nullptr)) {}
PoolingDescriptor& PoolingDescriptor::operator=(PoolingDescriptor&& other) noexcept {
  std::swap(desc_, other.desc_);
  return *this;
}

}  // namespace meridian::cuda
