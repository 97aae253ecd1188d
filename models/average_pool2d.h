// Average pooling over NCHW images with a square window (torch.nn.AvgPool2d without padding). No
// parameters.
#pragma once

#include "models/layer.h"

namespace meridian::models {

class AveragePool2d final : public Layer {
 public:
  // Throws error::UserError when the window does not fit the input.
  AveragePool2d(Shape input, std::size_t window, std::size_t stride);

  std::string describe() const override;
  std::unique_ptr<Layer> clone() const override {
    return std::make_unique<AveragePool2d>(input_, geometry_.window, geometry_.stride);
  }
  Shape input_shape() const override { return input_; }
  Shape output_shape() const override { return {input_.channels, geometry_.out_height(), geometry_.out_width()}; }
  void forward(Backend& backend, const float* in, float* out, std::size_t batch) override {
    backend.average_pool_forward(geometry_, batch, in, out);
  }
  void backward(Backend& backend, const float*, const float*, const float* dout, float* din,
                std::size_t batch) override {
    if (din != nullptr) backend.average_pool_backward(geometry_, batch, dout, din);
  }

 private:
  Shape input_;
  PoolGeometry geometry_;
};

}  // namespace meridian::models
