#include "models/residual_block.h"

#include <stdexcept>

#include "error/error.h"

namespace meridian::models {

ResidualBlock::ResidualBlock(std::unique_ptr<LayerSequence> body, std::unique_ptr<LayerSequence> shortcut)
    : body_(std::move(body)), shortcut_(std::move(shortcut)) {
  if (!body_) throw error::InternalError("residual: no body");
  const Shape in = body_->input_shape(), out = body_->output_shape();
  if (!shortcut_ && !(in == out))
    throw error::UserError("residual: the body maps " + in.to_string() + " to " + out.to_string() +
                           ", so the identity shortcut cannot be added; give a shortcut");
  if (shortcut_ && !(shortcut_->input_shape() == in && shortcut_->output_shape() == out))
    throw error::UserError("residual: the body maps " + in.to_string() + " to " + out.to_string() +
                           " but the shortcut maps " + shortcut_->input_shape().to_string() + " to " +
                           shortcut_->output_shape().to_string());
}

std::string ResidualBlock::describe() const {
  return "residual(body=" + body_->describe() + ",shortcut=" + (shortcut_ ? shortcut_->describe() : "identity") + ")";
}

std::unique_ptr<Layer> ResidualBlock::clone() const {
  auto body = std::unique_ptr<LayerSequence>(static_cast<LayerSequence*>(body_->clone().release()));
  std::unique_ptr<LayerSequence> shortcut;
  if (shortcut_) shortcut.reset(static_cast<LayerSequence*>(shortcut_->clone().release()));
  return std::make_unique<ResidualBlock>(std::move(body), std::move(shortcut));
}

std::size_t ResidualBlock::parameter_count() const {
  return body_->parameter_count() + (shortcut_ ? shortcut_->parameter_count() : 0);
}

void ResidualBlock::bind(std::span<float> parameters, std::span<float> gradients) {
  const std::size_t n = body_->parameter_count();
  body_->bind(parameters.subspan(0, n), gradients.subspan(0, n));
  if (shortcut_) shortcut_->bind(parameters.subspan(n), gradients.subspan(n));
}

std::size_t ResidualBlock::state_count() const {
  return body_->state_count() + (shortcut_ ? shortcut_->state_count() : 0);
}

void ResidualBlock::bind_state(std::span<float> state) {
  const std::size_t n = body_->state_count();
  body_->bind_state(state.subspan(0, n));
  if (shortcut_) shortcut_->bind_state(state.subspan(n));
}

void ResidualBlock::initialize(SplitMix64& random) {
  body_->initialize(random);
  if (shortcut_) shortcut_->initialize(random);
}

void ResidualBlock::set_training(bool training) {
  body_->set_training(training);
  if (shortcut_) shortcut_->set_training(training);
}

void ResidualBlock::set_stream(std::uint64_t stream) {
  body_->set_stream(stream);
  if (shortcut_) shortcut_->set_stream(stream);
}

void ResidualBlock::reserve(Backend& backend, std::size_t batch) {
  body_->reserve(backend, batch);
  body_out_.reserve(backend, batch * output_shape().size());
  if (!shortcut_) return;
  shortcut_->reserve(backend, batch);
  shortcut_out_.reserve(backend, batch * output_shape().size());
  shortcut_din_.reserve(backend, batch * input_shape().size());
}

void ResidualBlock::forward(Backend& backend, const float* in, float* out, std::size_t batch) {
  reserve(backend, batch);
  const std::size_t n = batch * output_shape().size();
  body_->forward(backend, in, body_out_.data(), batch);
  if (shortcut_) {
    shortcut_->forward(backend, in, shortcut_out_.data(), batch);
    backend.add(n, body_out_.data(), shortcut_out_.data(), out);
  } else {
    backend.add(n, body_out_.data(), in, out);
  }
}

// The sum passes dout unchanged to both branches; their input gradients add up.
void ResidualBlock::backward(Backend& backend, const float* in, const float*, const float* dout, float* din,
                             std::size_t batch) {
  body_->backward(backend, in, body_out_.data(), dout, din, batch);
  const std::size_t n = batch * input_shape().size();
  if (shortcut_) {
    shortcut_->backward(backend, in, shortcut_out_.data(), dout, din == nullptr ? nullptr : shortcut_din_.data(),
                        batch);
    if (din != nullptr) backend.add(n, din, shortcut_din_.data(), din);
  } else if (din != nullptr) {
    backend.add(n, din, dout, din);
  }
}

// Both branches see the same dout, so example b's squared norm is the sum of theirs.
bool ResidualBlock::track_per_example_norms(double* squared_norms) {
  if (!body_->track_per_example_norms(squared_norms)) return false;
  if (shortcut_ && !shortcut_->track_per_example_norms(squared_norms)) {
    body_->track_per_example_norms(nullptr);
    return false;
  }
  return true;
}

}  // namespace meridian::models
