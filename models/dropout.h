// Inverted dropout (torch.nn.Dropout): while training, each element is zeroed with probability p and the
// others are scaled by 1/(1 − p); in evaluation it passes values through. No parameters.
//
// Reproducible: the masks are a fixed function of the seed (drawn from the model's seed in initialize()),
// the replica's stream (Layer::set_stream) and how many training forward passes came before, through a
// counter-based hash (math::dropout_keep), so the CPU and the GPU draw the same masks. Every training
// forward draws a new mask; backward uses the mask of the last forward.
#pragma once

#include <cstdint>

#include "models/layer.h"

namespace meridian::models {

class Dropout final : public Layer {
 public:
  // Throws error::UserError for p outside [0, 1).
  Dropout(Shape shape, float p);

  std::string describe() const override;
  // Same seed and stream; its count of draws starts again at 0.
  std::unique_ptr<Layer> clone() const override;
  Shape input_shape() const override { return shape_; }
  Shape output_shape() const override { return shape_; }
  void initialize(SplitMix64& random) override;
  void set_training(bool training) override { training_ = training; }
  void set_stream(std::uint64_t stream) override { stream_ = stream; }
  void forward(Backend& backend, const float* in, float* out, std::size_t batch) override;
  void backward(Backend& backend, const float* in, const float* out, const float* dout, float* din,
                std::size_t batch) override;

 private:
  Shape shape_;
  float p_;
  bool training_ = true;
  std::uint64_t seed_ = 0, stream_ = 0, draws_ = 0;
  std::uint64_t key_ = 0;  // the mask of the last training forward
};

}  // namespace meridian::models
