// The computation of one max pooling layer (models/max_pool2d.h) for a fixed geometry, made by the backend
// (Backend::make_max_pooling): an argmax record on the CPU (models/argmax_max_pooling.h), cuDNN on the GPU
// (cuda/cudnn_max_pooling.h). The gradient flows only to each window's maximum; where a window holds
// equal maxima the CPU picks the first in row-major order, cuDNN one of them.
//
// All pointers are backend memory; in (batch, channels, in_h, in_w), out (batch, channels, out_h, out_w).
// Ownership: must not outlive the backend that made it. Thread safety: one thread at a time.
#pragma once

#include <cstddef>

namespace meridian::models {

class MaxPooling {
 public:
  virtual ~MaxPooling() = default;
  // Sizes the workspace for batches of up to `batch` images; allocates only when growing.
  virtual void reserve(std::size_t batch) = 0;
  // out = the window maxima of in.
  virtual void forward(std::size_t batch, const float* in, float* out) = 0;
  // din (overwritten) = dout routed back to each window's maximum; in/out are the last forward()'s.
  virtual void backward(std::size_t batch, const float* in, const float* out, const float* dout, float* din) = 0;
};

}  // namespace meridian::models
