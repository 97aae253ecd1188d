// RAII owners of the cuDNN descriptors the convolution and pooling layers use: a 4-D NCHW float tensor,
// a convolution filter, a 2-D convolution and a 2-D pooling. Each creates its descriptor in the
// constructor and destroys it in the destructor; move-only. Every cuDNN call is checked
// (MERIDIAN_CUDNN_CHECK: file, line, status name).
//
// The filter, convolution and pooling descriptors belong to cuDNN's legacy API, which cuDNN 9 marks
// deprecated (it warns only with CUDNN_WARN_DEPRECATED) but still ships and supports; the graph API
// replacement is noted in docs/cuda.md.
//
// Thread safety: one thread at a time. Throws meridian::cuda::Error when cuDNN fails (including when it
// cannot load, on a machine without a usable device).
#pragma once

#include <cudnn.h>

#include <cstddef>

namespace meridian::cuda {

class TensorDescriptor {
 public:
  TensorDescriptor();
  ~TensorDescriptor();
  TensorDescriptor(TensorDescriptor&& other) noexcept;
  TensorDescriptor& operator=(TensorDescriptor&& other) noexcept;
  TensorDescriptor(const TensorDescriptor&) = delete;
  TensorDescriptor& operator=(const TensorDescriptor&) = delete;

  // A dense NCHW float tensor (n, c, h, w). Throws error::InternalError beyond cuDNN's int range.
  void set(std::size_t n, std::size_t c, std::size_t h, std::size_t w);
  cudnnTensorDescriptor_t get() const noexcept { return desc_; }

 private:
  cudnnTensorDescriptor_t desc_ = nullptr;
};

class FilterDescriptor {
 public:
  // Filters (out_c, in_c, k, k), NCHW float: PyTorch's Conv2d weight layout.
  FilterDescriptor(std::size_t out_channels, std::size_t in_channels, std::size_t kernel);
  ~FilterDescriptor();
  FilterDescriptor(FilterDescriptor&& other) noexcept;
  FilterDescriptor& operator=(FilterDescriptor&& other) noexcept;
  FilterDescriptor(const FilterDescriptor&) = delete;
  FilterDescriptor& operator=(const FilterDescriptor&) = delete;

  cudnnFilterDescriptor_t get() const noexcept { return desc_; }

 private:
  cudnnFilterDescriptor_t desc_ = nullptr;
};

class ConvolutionDescriptor {
 public:
  // Cross-correlation (what torch.nn.Conv2d computes) with square padding and stride, no dilation, fp32
  // accumulation and FMA math only (no TF32 tensor cores, like the backend's cuBLAS GEMMs).
  ConvolutionDescriptor(std::size_t padding, std::size_t stride);
  ~ConvolutionDescriptor();
  ConvolutionDescriptor(ConvolutionDescriptor&& other) noexcept;
  ConvolutionDescriptor& operator=(ConvolutionDescriptor&& other) noexcept;
  ConvolutionDescriptor(const ConvolutionDescriptor&) = delete;
  ConvolutionDescriptor& operator=(const ConvolutionDescriptor&) = delete;

  cudnnConvolutionDescriptor_t get() const noexcept { return desc_; }

 private:
  cudnnConvolutionDescriptor_t desc_ = nullptr;
};

class PoolingDescriptor {
 public:
  // Deterministic max pooling over a square window, no padding, NaNs not propagated.
  PoolingDescriptor(std::size_t window, std::size_t stride);
  ~PoolingDescriptor();
  PoolingDescriptor(PoolingDescriptor&& other) noexcept;
  PoolingDescriptor& operator=(PoolingDescriptor&& other) noexcept;
  PoolingDescriptor(const PoolingDescriptor&) = delete;
  PoolingDescriptor& operator=(const PoolingDescriptor&) = delete;

  cudnnPoolingDescriptor_t get() const noexcept { return desc_; }

 private:
  cudnnPoolingDescriptor_t desc_ = nullptr;
};

}  // namespace meridian::cuda
