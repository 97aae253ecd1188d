// GELU, tanh or sigmoid, element-wise (torch.nn.GELU(), Tanh, Sigmoid); ReLU has its own layer (relu.h).
// No parameters.
#pragma once

#include "models/layer.h"

namespace meridian::models {

class ActivationLayer final : public Layer {
 public:
  ActivationLayer(Shape shape, Activation f) : shape_(shape), f_(f) {}

  std::string describe() const override {
    switch (f_) {
      case Activation::gelu: return "gelu";
      case Activation::tanh: return "tanh";
      case Activation::sigmoid: return "sigmoid";
    }
    return "activation";
  }
  std::unique_ptr<Layer> clone() const override { return std::make_unique<ActivationLayer>(shape_, f_); }
  Shape input_shape() const override { return shape_; }
  Shape output_shape() const override { return shape_; }
  void forward(Backend& backend, const float* in, float* out, std::size_t batch) override {
    backend.activation_forward(f_, batch * shape_.size(), in, out);
  }
  void backward(Backend& backend, const float* in, const float* out, const float* dout, float* din,
                std::size_t batch) override {
    if (din != nullptr) backend.activation_backward(f_, batch * shape_.size(), in, out, dout, din);
  }

 private:
  Shape shape_;
  Activation f_;
};

}  // namespace meridian::models
