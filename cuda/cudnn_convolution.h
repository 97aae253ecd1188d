// A convolution layer's computation on cuDNN (the CUDA backend's make_convolution): forward, backward
// data and backward filter through cudnnConvolution*, the bias added with cudnnAddTensor, and the bias
// gradient summed by the backend's sum_channels kernel (in the CPU's order). Algorithms are chosen once
// per batch size from cuDNN's heuristics, preferring deterministic ones, so repeated runs give the same
// bits; the workspace is grown to the largest one needed and reused.
//
// Ownership: borrows the cuDNN handle and the stream (the backend's, which must outlive it); owns its
// descriptors (cuda/dnn_descriptors.h) and workspace. Thread safety: one thread at a time. Throws
// meridian::cuda::Error when cuDNN fails, naming file and line.
#pragma once

#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <cstddef>

#include "cuda/device_buffer.h"
#include "cuda/dnn_descriptors.h"
#include "models/backend.h"
#include "models/convolution.h"

namespace meridian::cuda {

class CudnnConvolution final : public models::Convolution {
 public:
  CudnnConvolution(cudnnHandle_t dnn, cudaStream_t stream, const models::ConvGeometry& g, std::size_t out_channels);

  void reserve(std::size_t batch) override;
  void forward(std::size_t batch, const float* in, const float* weight, const float* bias, float* out) override;
  void backward(std::size_t batch, const float* in, const float* dout, const float* weight, float* dweight,
                float* dbias, float* din) override;

 private:
  // Describes batches of `batch` images and picks the algorithms for them (no-op for the current size).
  void shape_for(std::size_t batch);
  void* workspace() { return workspace_.data(); }

  cudnnHandle_t dnn_;
  cudaStream_t stream_;
  models::ConvGeometry geometry_;
  std::size_t out_channels_;
  FilterDescriptor filter_;
  ConvolutionDescriptor convolution_;
  TensorDescriptor bias_;  // (1, out_c, 1, 1)
  TensorDescriptor in_, out_;
  std::size_t batch_ = 0;  // the batch size in_/out_ and the algorithms are for
  cudnnConvolutionFwdAlgo_t forward_algo_{};
  cudnnConvolutionBwdDataAlgo_t data_algo_{};
  cudnnConvolutionBwdFilterAlgo_t filter_algo_{};
  DeviceBuffer<std::byte> workspace_;
};

}  // namespace meridian::cuda
