// Rectified linear unit, element-wise: y = max(x, 0). No parameters.
#pragma once

#include "models/layer.h"

namespace meridian::models {

class Relu final : public Layer {
 public:
  explicit Relu(Shape shape) : shape_(shape) {}

  std::string describe() const override { return "relu"; }
  std::unique_ptr<Layer> clone() const override { return std::make_unique<Relu>(shape_); }
  Shape input_shape() const override { return shape_; }
  Shape output_shape() const override { return shape_; }
  void forward(Backend& backend, const float* in, float* out, std::size_t batch) override {
    backend.relu_forward(batch * shape_.size(), in, out);
  }
  void backward(Backend& backend, const float* in, const float* out, const float* dout, float* din,
                std::size_t batch) override {
    if (din != nullptr) backend.relu_backward(batch * shape_.size(), out, dout, din);
  }

 private:
  Shape shape_;
};

}  // namespace meridian::models
