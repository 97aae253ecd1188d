// Layers applied one after the other, as one layer (torch.nn.Sequential): the body and the shortcut of a
// residual block. Its parameters and state are its layers' laid end to end in layer order; it owns the
// activations between its layers and the gradients flowing back through them, sized by reserve().
#pragma once

#include <memory>
#include <vector>

#include "models/backend_buffer.h"
#include "models/layer.h"

namespace meridian::models {

class LayerSequence final : public Layer {
 public:
  // Throws error::UserError when `layers` is empty or a layer's input shape differs from the
  // previous layer's output shape.
  explicit LayerSequence(std::vector<std::unique_ptr<Layer>> layers);

  // "[conv2d(...)|batch_norm2d(...)|relu]"
  std::string describe() const override;
  std::unique_ptr<Layer> clone() const override;
  Shape input_shape() const override { return layers_.front()->input_shape(); }
  Shape output_shape() const override { return layers_.back()->output_shape(); }
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
  // True when every layer tracks; otherwise none does.
  bool track_per_example_norms(double* squared_norms) override;

  std::size_t size() const { return layers_.size(); }
  const Layer& layer(std::size_t i) const { return *layers_.at(i); }

 private:
  std::vector<std::unique_ptr<Layer>> layers_;
  std::size_t reserved_batch_ = 0;
  std::vector<BackendBuffer<float>> activations_;  // activations_[i] = output of layer i < size() − 1
  BackendBuffer<float> grad_a_, grad_b_;           // ping-pong gradients between layers
};

}  // namespace meridian::models
