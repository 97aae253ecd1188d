#include "models/max_pool2d.h"

#include <stdexcept>

#include "error/error.h"

namespace meridian::models {

MaxPool2d::MaxPool2d(Shape input, std::size_t window, std::size_t stride) : input_(input) {
  if (window == 0 || stride == 0 || input.height < window || input.width < window)
    throw error::UserError("max_pool2d: window " + std::to_string(window) + " does not fit input " + input.to_string());
  geometry_ = PoolGeometry{input.channels, input.height, input.width, window, stride};
}

std::string MaxPool2d::describe() const {
  return "max_pool2d(k" + std::to_string(geometry_.window) + ",s" + std::to_string(geometry_.stride) + ")";
}

Shape MaxPool2d::output_shape() const { return {input_.channels, geometry_.out_height(), geometry_.out_width()}; }

void MaxPool2d::reserve(Backend& backend, std::size_t batch) {
  if (!pooling_) pooling_ = backend.make_max_pooling(geometry_);
  pooling_->reserve(batch);
}

void MaxPool2d::forward(Backend& backend, const float* in, float* out, std::size_t batch) {
  reserve(backend, batch);
  pooling_->forward(batch, in, out);
}

void MaxPool2d::backward(Backend& backend, const float* in, const float* out, const float* dout, float* din,
                         std::size_t batch) {
  if (din == nullptr) return;
  reserve(backend, batch);
  pooling_->backward(batch, in, out, dout, din);
}

}  // namespace meridian::models
