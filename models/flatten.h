// Flattens (C, H, W) samples into C·H·W features in row-major (C, H, W) order, as torch.nn.Flatten.
// NCHW batches are already laid out that way, so forward and backward are plain copies (in the
// backend's memory).
#pragma once

#include "models/layer.h"

namespace meridian::models {

class Flatten final : public Layer {
 public:
  explicit Flatten(Shape input) : input_(input) {}

  std::string describe() const override { return "flatten"; }
  std::unique_ptr<Layer> clone() const override { return std::make_unique<Flatten>(input_); }
  Shape input_shape() const override { return input_; }
  Shape output_shape() const override { return {input_.size(), 1, 1}; }
  void forward(Backend& backend, const float* in, float* out, std::size_t batch) override {
    backend.copy(out, in, batch * input_.size() * sizeof(float));
  }
  void backward(Backend& backend, const float*, const float*, const float* dout, float* din,
                std::size_t batch) override {
    if (din != nullptr) backend.copy(din, dout, batch * input_.size() * sizeof(float));
  }

 private:
  Shape input_;
};

}  // namespace meridian::models
