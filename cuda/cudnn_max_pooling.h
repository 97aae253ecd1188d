// A max pooling layer's computation on cuDNN (the CUDA backend's make_max_pooling):
// cudnnPoolingForward/Backward in CUDNN_POOLING_MAX_DETERMINISTIC mode. cuDNN's backward pass finds each
// window's maximum again from the forward input and output, so there is no argmax record. Where a window
// holds equal maxima cuDNN may route the gradient to another of them than the CPU (which takes the first);
// values and gradients agree exactly otherwise.
//
// Ownership: borrows the cuDNN handle (the backend's, which must outlive it); owns its descriptors.
// Thread safety: one thread at a time. Throws meridian::cuda::Error when cuDNN fails, naming file and line.
#pragma once

#include <cudnn.h>

#include <cstddef>

#include "cuda/dnn_descriptors.h"
#include "models/backend.h"
#include "models/max_pooling.h"

namespace meridian::cuda {

class CudnnMaxPooling final : public models::MaxPooling {
 public:
  CudnnMaxPooling(cudnnHandle_t dnn, const models::PoolGeometry& g);

  void reserve(std::size_t batch) override { shape_for(batch); }
  void forward(std::size_t batch, const float* in, float* out) override;
  void backward(std::size_t batch, const float* in, const float* out, const float* dout, float* din) override;

 private:
  void shape_for(std::size_t batch);

  cudnnHandle_t dnn_;
  models::PoolGeometry geometry_;
  PoolingDescriptor pooling_;
  TensorDescriptor in_, out_;
  std::size_t batch_ = 0;
};

}  // namespace meridian::cuda
