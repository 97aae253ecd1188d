// Convolution as im2col + GEMM over a Backend's building blocks (the CPU backend's make_convolution on a
// CPU without AVX2 and FMA, and the reference the implicit GEMM convolution is tested against).
// Image by image: one image's column matrix is hot in cache between im2col and its GEMM (measured 2-3x
// faster here than one batch-wide GEMM on a column matrix of megabytes), and the GEMM writes the NCHW
// output directly. The forward pass keeps every image's columns for the backward pass, which reads them
// back instead of redoing im2col.
//
// Ownership: borrows the backend (which must outlive it); owns its column workspaces, allocated from the
// backend. Thread safety: one thread at a time.
#pragma once

#include "models/backend.h"
#include "models/backend_buffer.h"
#include "models/convolution.h"

namespace meridian::models {

class Im2colConvolution final : public Convolution {
 public:
  Im2colConvolution(Backend& backend, const ConvGeometry& g, std::size_t out_channels);

  void reserve(std::size_t batch) override;
  void forward(std::size_t batch, const float* in, const float* weight, const float* bias, float* out) override;
  void backward(std::size_t batch, const float* in, const float* dout, const float* weight, float* dweight,
                float* dbias, float* din) override;

 private:
  Backend& backend_;
  ConvGeometry geometry_;
  std::size_t out_channels_;
  BackendBuffer<float> columns_;   // (batch, patch, out_pixels): each image's columns from forward
  BackendBuffer<float> dcolumns_;  // (patch, out_pixels): one image's column gradient
};

}  // namespace meridian::models
