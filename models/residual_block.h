// A residual block (He et al. 2016): out = body(x) + shortcut(x), where the shortcut is the identity or a
// short layer sequence (a 1×1 convolution with stride followed by batch norm, where the body changes the
// shape). The ReLU that follows the sum in a ResNet is the next layer. Parameters and state: the body's,
// then the shortcut's.
#pragma once

#include <memory>

#include "models/backend_buffer.h"
#include "models/layer_sequence.h"

namespace meridian::models {

class ResidualBlock final : public Layer {
 public:
  // `shortcut` null means the identity. Throws error::InternalError when the body is null, error::UserError when the
  // shortcut's (or, for the identity, the input's) shape differs from the body's in input or output.
  ResidualBlock(std::unique_ptr<LayerSequence> body, std::unique_ptr<LayerSequence> shortcut);

  // "residual(body=[...],shortcut=[...])" or "residual(body=[...],shortcut=identity)"
  std::string describe() const override;
  std::unique_ptr<Layer> clone() const override;
  Shape input_shape() const override { return body_->input_shape(); }
  Shape output_shape() const override { return body_->output_shape(); }
  std::size_t parameter_count() const override;
  void bind(std::span<float> parameters, std::span<float> gradients) override;
  std::size_t state_count() const override;
  void bind_state(std::span<float> state) override;
  void initialize(SplitMix64& random) override;
  void set_training(bool training) override;
  void set_stream(std::uint64_t stream) override;
  void reserve(Backend& backend, std::size_t batch) override;
  void forward(Backend& backend, const float* in, float* out, std::size_t batch) override;
  void backward(Backend& backend, const float* in, const float* out, const float* dout, float* din,
                std::size_t batch) override;
  // True when the body and the shortcut track; otherwise neither does.
  bool track_per_example_norms(double* squared_norms) override;

 private:
  std::unique_ptr<LayerSequence> body_, shortcut_;
  BackendBuffer<float> body_out_;      // (batch, output): the body's output, which its backward needs
  BackendBuffer<float> shortcut_out_;  // (batch, output), with a shortcut sequence
  BackendBuffer<float> shortcut_din_;  // (batch, input), with a shortcut sequence
};

}  // namespace meridian::models
