// Fully connected layer y = x·Wᵀ + b with W (out, in) and b (out), PyTorch's layout, so parameters
// map one to one onto torch.nn.Linear.
#pragma once

#include "models/layer.h"

namespace meridian::models {

class Linear final : public Layer {
 public:
  Linear(std::size_t in_features, std::size_t out_features, InitScheme init);

  std::string describe() const override;
  std::unique_ptr<Layer> clone() const override { return std::make_unique<Linear>(in_, out_, init_); }
  Shape input_shape() const override { return {in_, 1, 1}; }
  Shape output_shape() const override { return {out_, 1, 1}; }
  std::size_t parameter_count() const override { return out_ * in_ + out_; }
  void bind(std::span<float> parameters, std::span<float> gradients) override;
  void initialize(SplitMix64& random) override;
  void forward(Backend& backend, const float* in, float* out, std::size_t batch) override;
  void backward(Backend& backend, const float* in, const float* out, const float* dout, float* din,
                std::size_t batch) override;
  bool track_per_example_norms(double* squared_norms) override;

 private:
  std::size_t in_, out_;
  InitScheme init_;
  std::span<float> weight_, bias_, weight_grad_, bias_grad_;  // (out, in), (out)
  double* squared_norms_ = nullptr;                          // (batch) while tracking per-example norms
};

}  // namespace meridian::models
