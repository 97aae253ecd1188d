// Max pooling over NCHW images with a square window (torch.nn.MaxPool2d without padding). Ties go to
// the first maximum in row-major window order; the gradient flows only to that element. The computation
// is the backend's (Backend::make_max_pooling), made at the first reserve().
#pragma once

#include <memory>

#include "models/max_pooling.h"

#include "models/layer.h"

namespace meridian::models {

class MaxPool2d final : public Layer {
 public:
  // Throws error::UserError when the window does not fit the input.
  MaxPool2d(Shape input, std::size_t window, std::size_t stride);

  std::string describe() const override;
  std::unique_ptr<Layer> clone() const override {
    return std::make_unique<MaxPool2d>(input_, geometry_.window, geometry_.stride);
  }
  Shape input_shape() const override { return input_; }
  Shape output_shape() const override;
  void reserve(Backend& backend, std::size_t batch) override;
  void forward(Backend& backend, const float* in, float* out, std::size_t batch) override;
  void backward(Backend& backend, const float* in, const float* out, const float* dout, float* din,
                std::size_t batch) override;

 private:
  Shape input_;
  PoolGeometry geometry_;
  std::unique_ptr<MaxPooling> pooling_;  // the backend's, with its workspace; null before reserve()
};

}  // namespace meridian::models
