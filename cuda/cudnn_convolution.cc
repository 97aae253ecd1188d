#include "cuda/cudnn_convolution.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "cuda/error.h"
#include "cuda/kernels.h"
#include "error/error.h"

namespace meridian::cuda {

namespace {

constexpr int kCandidates = 8;  // more than cuDNN has algorithms of any kind

// The first algorithm of cuDNN's ranking that works and is deterministic, else the first that works: the
// ranking is by expected speed, and deterministic results keep runs (and parity tests) reproducible.
template <typename Perf>
auto pick(const Perf* perf, int returned, const char* what) {
  const Perf* chosen = nullptr;
  for (int i = 0; i < returned && chosen == nullptr; ++i)
    if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].determinism == CUDNN_DETERMINISTIC) chosen = &perf[i];
  for (int i = 0; i < returned && chosen == nullptr; ++i)
    if (perf[i].status == CUDNN_STATUS_SUCCESS) chosen = &perf[i];
  if (chosen == nullptr) throw error::InternalError(std::string("cuDNN offers no usable ") + what + " algorithm");
  return *chosen;
}

}  // namespace

CudnnConvolution::CudnnConvolution(cudnnHandle_t dnn, cudaStream_t stream, const models::ConvGeometry& g,
                                   std::size_t out_channels)
    : dnn_(dnn),
      stream_(stream),
      geometry_(g),
      out_channels_(out_channels),
      filter_(out_channels, g.in_channels, g.kernel),
      convolution_(g.padding, g.stride) {
  bias_.set(1, out_channels_, 1, 1);
}

void CudnnConvolution::shape_for(std::size_t batch) {
  if (batch == batch_) return;
  in_.set(batch, geometry_.in_channels, geometry_.in_height, geometry_.in_width);
  out_.set(batch, out_channels_, geometry_.out_height(), geometry_.out_width());
  int returned = 0;
  cudnnConvolutionFwdAlgoPerf_t forward[kCandidates];
  MERIDIAN_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(dnn_, in_.get(), filter_.get(), convolution_.get(),
                                                              out_.get(), kCandidates, &returned, forward));
  const auto f = pick(forward, returned, "forward convolution");
  cudnnConvolutionBwdDataAlgoPerf_t data[kCandidates];
  MERIDIAN_CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(dnn_, filter_.get(), out_.get(), convolution_.get(),
                                                                   in_.get(), kCandidates, &returned, data));
  const auto d = pick(data, returned, "backward-data convolution");
  cudnnConvolutionBwdFilterAlgoPerf_t filter[kCandidates];
  MERIDIAN_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(dnn_, in_.get(), out_.get(), convolution_.get(),
                                                                     filter_.get(), kCandidates, &returned, filter));
  const auto w = pick(filter, returned, "backward-filter convolution");
  forward_algo_ = f.algo;
  data_algo_ = d.algo;
  filter_algo_ = w.algo;
  const std::size_t bytes = std::max({f.memory, d.memory, w.memory});
  if (bytes > workspace_.size()) {
    // The old workspace may still be in use by work enqueued earlier; DeviceBuffer's cudaFree waits for it.
    workspace_ = DeviceBuffer<std::byte>(bytes);
  }
  batch_ = batch;
}

void CudnnConvolution::reserve(std::size_t batch) { shape_for(batch); }

void CudnnConvolution::forward(std::size_t batch, const float* in, const float* weight, const float* bias, float* out) {
  shape_for(batch);
  const float one = 1.0f, zero = 0.0f;
  MERIDIAN_CUDNN_CHECK(cudnnConvolutionForward(dnn_, &one, in_.get(), in, filter_.get(), weight, convolution_.get(),
                                               forward_algo_, workspace(), workspace_.size(), &zero, out_.get(), out));
  MERIDIAN_CUDNN_CHECK(cudnnAddTensor(dnn_, &one, bias_.get(), bias, &one, out_.get(), out));
}

void CudnnConvolution::backward(std::size_t batch, const float* in, const float* dout, const float* weight,
                                float* dweight, float* dbias, float* din) {
  shape_for(batch);
  const float one = 1.0f, zero = 0.0f;
  const std::size_t pixels = geometry_.out_height() * geometry_.out_width();
  kernels::sum_channels(stream_, batch, out_channels_, pixels, dout, dbias);
  MERIDIAN_CUDNN_CHECK(cudnnConvolutionBackwardFilter(dnn_, &one, in_.get(), in, out_.get(), dout, convolution_.get(),
                                                      filter_algo_, workspace(), workspace_.size(), &zero,
                                                      filter_.get(), dweight));
  if (din == nullptr) return;
  MERIDIAN_CUDNN_CHECK(cudnnConvolutionBackwardData(dnn_, &one, filter_.get(), weight, out_.get(), dout,
                                                    convolution_.get(), data_algo_, workspace(), workspace_.size(),
                                                    &zero, in_.get(), din));
}

}  // namespace meridian::cuda
