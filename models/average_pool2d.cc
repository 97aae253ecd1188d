#include "models/average_pool2d.h"

#include <stdexcept>

#include "error/error.h"

namespace meridian::models {

AveragePool2d::AveragePool2d(Shape input, std::size_t window, std::size_t stride) : input_(input) {
  if (window == 0 || stride == 0 || input.height < window || input.width < window)
    throw error::UserError("avg_pool2d: window " + std::to_string(window) + " does not fit input " + input.to_string());
  geometry_ = PoolGeometry{input.channels, input.height, input.width, window, stride};
}

std::string AveragePool2d::describe() const {
  return "avg_pool2d(k" + std::to_string(geometry_.window) + ",s" + std::to_string(geometry_.stride) + ")";
}

}  // namespace meridian::models
