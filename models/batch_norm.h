// Batch normalization (torch.nn.BatchNorm1d over the features of {n, 1, 1} samples, BatchNorm2d over the
// channels of images), with learned scale γ and shift β (parameters: γ (C), then β (C)) and running mean
// and variance (state: mean (C), then variance (C); saved with the model, never gradients). Training
// normalizes with the batch's statistics and moves the running ones by `momentum`; evaluation normalizes
// with the running ones (Backend::batch_norm_forward). momentum and eps mean what they mean in torch.
//
// A model that splits batches across threads (Model::set_threads) normalizes each part with its own
// statistics, as data-parallel training without synchronized batch norm does.
#pragma once

#include "models/backend_buffer.h"
#include "models/layer.h"

namespace meridian::models {

class BatchNorm final : public Layer {
 public:
  // Throws error::UserError for momentum outside [0, 1] or eps <= 0.
  explicit BatchNorm(Shape shape, float momentum = 0.1f, float eps = 1e-5f);

  // "batch_norm1d(C,...)" for feature vectors, "batch_norm2d(C,...)" for images; momentum and eps included.
  std::string describe() const override;
  std::unique_ptr<Layer> clone() const override { return std::make_unique<BatchNorm>(shape_, momentum_, eps_); }
  Shape input_shape() const override { return shape_; }
  Shape output_shape() const override { return shape_; }
  std::size_t parameter_count() const override { return 2 * shape_.channels; }
  void bind(std::span<float> parameters, std::span<float> gradients) override;
  std::size_t state_count() const override { return 2 * shape_.channels; }
  void bind_state(std::span<float> state) override;
  // γ = 1, β = 0, running mean 0 and variance 1, as torch.
  void initialize(SplitMix64& random) override;
  void set_training(bool training) override { training_ = training; }
  void reserve(Backend& backend, std::size_t batch) override;
  void forward(Backend& backend, const float* in, float* out, std::size_t batch) override;
  void backward(Backend& backend, const float* in, const float* out, const float* dout, float* din,
                std::size_t batch) override;

 private:
  ChannelLayout layout(std::size_t batch) const { return {batch, shape_.channels, shape_.height * shape_.width}; }

  Shape shape_;
  float momentum_, eps_;
  bool training_ = true;
  std::span<float> gamma_, beta_, gamma_grad_, beta_grad_;  // (C) each
  std::span<float> running_mean_, running_var_;             // (C) each
  BackendBuffer<float> mean_, inv_std_;                     // (C): the statistics the last forward used
};

}  // namespace meridian::models
