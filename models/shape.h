// The shape of one sample as it flows between layers: channels × height × width (a flat vector of
// n features is {n, 1, 1}). Batches add a leading batch dimension; tensors are row-major (NCHW).
#pragma once

#include <cstddef>
#include <string>

namespace meridian::models {

struct Shape {
  std::size_t channels = 0, height = 1, width = 1;

  std::size_t size() const { return channels * height * width; }
  std::string to_string() const {
    return std::to_string(channels) + "x" + std::to_string(height) + "x" + std::to_string(width);
  }
  friend bool operator==(const Shape&, const Shape&) = default;
};

}  // namespace meridian::models
