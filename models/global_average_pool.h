// Global average pooling (torch.nn.AdaptiveAvgPool2d(1) followed by flattening): each channel's mean over
// its pixels, (C, H, W) → (C, 1, 1). No parameters.
#pragma once

#include "models/layer.h"

namespace meridian::models {

class GlobalAveragePool final : public Layer {
 public:
  explicit GlobalAveragePool(Shape input) : input_(input) {}

  std::string describe() const override { return "global_avg_pool"; }
  std::unique_ptr<Layer> clone() const override { return std::make_unique<GlobalAveragePool>(input_); }
  Shape input_shape() const override { return input_; }
  Shape output_shape() const override { return {input_.channels, 1, 1}; }
  void forward(Backend& backend, const float* in, float* out, std::size_t batch) override {
    backend.global_average_pool_forward(layout(batch), in, out);
  }
  void backward(Backend& backend, const float*, const float*, const float* dout, float* din,
                std::size_t batch) override {
    if (din != nullptr) backend.global_average_pool_backward(layout(batch), dout, din);
  }

 private:
  ChannelLayout layout(std::size_t batch) const { return {batch, input_.channels, input_.height * input_.width}; }
  Shape input_;
};

}  // namespace meridian::models
