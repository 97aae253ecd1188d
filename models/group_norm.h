// Group normalization (torch.nn.GroupNorm): each sample's channels fall into `groups` groups of
// consecutive channels, each normalized by its own mean and variance, then scaled and shifted per channel
// (parameters: γ (C), then β (C)). It never mixes samples, so per-example gradients stay per example, and
// it behaves the same in training and evaluation.
#pragma once

#include "models/backend_buffer.h"
#include "models/layer.h"

namespace meridian::models {

class GroupNorm final : public Layer {
 public:
  // Throws error::UserError when groups is 0 or does not divide the channels, or eps <= 0.
  GroupNorm(Shape shape, std::size_t groups, float eps = 1e-5f);

  std::string describe() const override;
  std::unique_ptr<Layer> clone() const override { return std::make_unique<GroupNorm>(shape_, groups_, eps_); }
  Shape input_shape() const override { return shape_; }
  Shape output_shape() const override { return shape_; }
  std::size_t parameter_count() const override { return 2 * shape_.channels; }
  void bind(std::span<float> parameters, std::span<float> gradients) override;
  // γ = 1, β = 0, as torch.
  void initialize(SplitMix64& random) override;
  void reserve(Backend& backend, std::size_t batch) override;
  void forward(Backend& backend, const float* in, float* out, std::size_t batch) override;
  void backward(Backend& backend, const float* in, const float* out, const float* dout, float* din,
                std::size_t batch) override;
  bool track_per_example_norms(double* squared_norms) override;

 private:
  ChannelLayout layout(std::size_t batch) const { return {batch, shape_.channels, shape_.height * shape_.width}; }

  Shape shape_;
  std::size_t groups_;
  float eps_;
  std::span<float> gamma_, beta_, gamma_grad_, beta_grad_;  // (C) each
  BackendBuffer<float> mean_, inv_std_;                     // (batch, groups) of the last forward
  double* squared_norms_ = nullptr;                         // (batch) while tracking per-example norms
};

}  // namespace meridian::models
