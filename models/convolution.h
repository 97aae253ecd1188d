// The computation of one 2-D convolution layer (models/conv2d.h) for a fixed geometry, made by the backend
// (Backend::make_convolution): on the CPU an implicit GEMM (models/implicit_gemm_convolution.h) or, without
// AVX2, im2col + GEMM (models/im2col_convolution.h); cuDNN on the GPU (cuda/cudnn_convolution.h). The layer
// owns the parameters; this object owns only its workspace.
//
// All pointers are backend memory; shapes: in (batch, in_c, in_h, in_w), out (batch, out_c, out_h, out_w),
// weight (out_c, in_c, k, k) (PyTorch's layout), bias (out_c).
//
// Ownership: must not outlive the backend that made it. Thread safety: one thread at a time.
#pragma once

#include <cstddef>

namespace meridian::models {

class Convolution {
 public:
  virtual ~Convolution() = default;
  // Sizes the workspace for batches of up to `batch` images; allocates only when growing.
  virtual void reserve(std::size_t batch) = 0;
  // out = conv(in, weight) + bias.
  virtual void forward(std::size_t batch, const float* in, const float* weight, const float* bias, float* out) = 0;
  // Overwrites dweight and dbias with the gradients of the loss, and din (unless null) with the input
  // gradient, from dout. dweight and dbias may both be null (then only din is computed) on a
  // host-addressable backend. `in` is the input of the last forward() (whose workspace it may reuse).
  virtual void backward(std::size_t batch, const float* in, const float* dout, const float* weight, float* dweight,
                        float* dbias, float* din) = 0;
};

}  // namespace meridian::models
