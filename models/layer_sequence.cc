#include "models/layer_sequence.h"

#include <algorithm>
#include <stdexcept>

#include "error/error.h"

namespace meridian::models {

LayerSequence::LayerSequence(std::vector<std::unique_ptr<Layer>> layers) : layers_(std::move(layers)) {
  if (layers_.empty()) throw error::UserError("layer sequence: no layers");
  for (std::size_t i = 1; i < layers_.size(); ++i)
    if (!(layers_[i]->input_shape() == layers_[i - 1]->output_shape()))
      throw error::UserError("layer sequence: " + layers_[i]->describe() + " expects " +
                             layers_[i]->input_shape().to_string() + " but gets " +
                             layers_[i - 1]->output_shape().to_string() + " from " + layers_[i - 1]->describe());
  activations_.resize(layers_.size() - 1);
}

std::string LayerSequence::describe() const {
  std::string text = "[";
  for (std::size_t i = 0; i < layers_.size(); ++i) text.append(i == 0 ? "" : "|").append(layers_[i]->describe());
  return text + "]";
}

std::unique_ptr<Layer> LayerSequence::clone() const {
  std::vector<std::unique_ptr<Layer>> copies;
  for (const auto& layer : layers_) copies.push_back(layer->clone());
  return std::make_unique<LayerSequence>(std::move(copies));
}

std::size_t LayerSequence::parameter_count() const {
  std::size_t n = 0;
  for (const auto& layer : layers_) n += layer->parameter_count();
  return n;
}

void LayerSequence::bind(std::span<float> parameters, std::span<float> gradients) {
  std::size_t at = 0;
  for (auto& layer : layers_) {
    const std::size_t n = layer->parameter_count();
    layer->bind(parameters.subspan(at, n), gradients.subspan(at, n));
    at += n;
  }
}

std::size_t LayerSequence::state_count() const {
  std::size_t n = 0;
  for (const auto& layer : layers_) n += layer->state_count();
  return n;
}

void LayerSequence::bind_state(std::span<float> state) {
  std::size_t at = 0;
  for (auto& layer : layers_) {
    const std::size_t n = layer->state_count();
    layer->bind_state(state.subspan(at, n));
    at += n;
  }
}

void LayerSequence::initialize(SplitMix64& random) {
  for (auto& layer : layers_) layer->initialize(random);
}

void LayerSequence::set_training(bool training) {
  for (auto& layer : layers_) layer->set_training(training);
}

void LayerSequence::set_stream(std::uint64_t stream) {
  for (auto& layer : layers_) layer->set_stream(stream);
}

void LayerSequence::reserve(Backend& backend, std::size_t batch) {
  for (auto& layer : layers_) layer->reserve(backend, batch);
  if (batch <= reserved_batch_) return;
  std::size_t widest = input_shape().size();
  for (std::size_t i = 0; i + 1 < layers_.size(); ++i) {
    const std::size_t size = layers_[i]->output_shape().size();
    activations_[i].reserve(backend, batch * size);
    widest = std::max(widest, size);
  }
  grad_a_.reserve(backend, batch * widest);
  grad_b_.reserve(backend, batch * widest);
  reserved_batch_ = batch;
}

void LayerSequence::forward(Backend& backend, const float* in, float* out, std::size_t batch) {
  reserve(backend, batch);
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    float* to = i + 1 == layers_.size() ? out : activations_[i].data();
    layers_[i]->forward(backend, in, to, batch);
    in = to;
  }
}

void LayerSequence::backward(Backend& backend, const float* in, const float* out, const float* dout, float* din,
                             std::size_t batch) {
  const float* gradient = dout;
  for (std::size_t i = layers_.size(); i-- > 0;) {
    const float* layer_in = i == 0 ? in : activations_[i - 1].data();
    const float* layer_out = i + 1 == layers_.size() ? out : activations_[i].data();
    float* layer_din = i == 0 ? din : (gradient == grad_a_.data() ? grad_b_.data() : grad_a_.data());
    layers_[i]->backward(backend, layer_in, layer_out, gradient, layer_din, batch);
    gradient = layer_din;
  }
}

bool LayerSequence::track_per_example_norms(double* squared_norms) {
  for (auto& layer : layers_) {
    if (layer->track_per_example_norms(squared_norms)) continue;
    for (auto& other : layers_) other->track_per_example_norms(nullptr);
    return false;
  }
  return true;
}

}  // namespace meridian::models
