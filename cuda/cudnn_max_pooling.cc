#include "cuda/cudnn_max_pooling.h"

#include "cuda/error.h"

namespace meridian::cuda {

CudnnMaxPooling::CudnnMaxPooling(cudnnHandle_t dnn, const models::PoolGeometry& g)
    : dnn_(dnn), geometry_(g), pooling_(g.window, g.stride) {}

void CudnnMaxPooling::shape_for(std::size_t batch) {
  if (batch == batch_) return;
  in_.set(batch, geometry_.channels, geometry_.in_height, geometry_.in_width);
  out_.set(batch, geometry_.channels, geometry_.out_height(), geometry_.out_width());
  batch_ = batch;
}

void CudnnMaxPooling::forward(std::size_t batch, const float* in, float* out) {
  shape_for(batch);
  const float one = 1.0f, zero = 0.0f;
  MERIDIAN_CUDNN_CHECK(cudnnPoolingForward(dnn_, pooling_.get(), &one, in_.get(), in, &zero, out_.get(), out));
}

void CudnnMaxPooling::backward(std::size_t batch, const float* in, const float* out, const float* dout, float* din) {
  shape_for(batch);
  const float one = 1.0f, zero = 0.0f;
  MERIDIAN_CUDNN_CHECK(cudnnPoolingBackward(dnn_, pooling_.get(), &one, out_.get(), out, out_.get(), dout, in_.get(),
                                            in, &zero, in_.get(), din));
}

}  // namespace meridian::cuda
