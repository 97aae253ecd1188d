// Max pooling over NCHW images with a square window (torch.nn.MaxPool2d without padding). Ties go to
// the first maximum in row-major window order; the gradient flows only to that element.
#pragma once

#include <cstdint>
#include <vector>

#include "models/layer.h"

namespace meridian::models {

class MaxPool2d final : public Layer {
 public:
  // Throws std::invalid_argument when the window does not fit the input.
  MaxPool2d(Shape input, std::size_t window, std::size_t stride);

  std::string describe() const override;
  std::unique_ptr<Layer> clone() const override {
    return std::make_unique<MaxPool2d>(input_, geometry_.window, geometry_.stride);
  }
  Shape input_shape() const override { return input_; }
  Shape output_shape() const override;
  void reserve(std::size_t batch) override;
  void forward(Backend& backend, const float* in, float* out, std::size_t batch) override;
  void backward(Backend& backend, const float* in, const float* out, const float* dout, float* din,
                std::size_t batch) override;

 private:
  Shape input_;
  PoolGeometry geometry_;
  std::vector<std::int32_t> argmax_;  // (batch, channels, out_h, out_w): offset inside the input plane
};

}  // namespace meridian::models
