#include "models/batch_norm.h"

#include <algorithm>
#include <stdexcept>

#include "error/error.h"
#include "models/number_text.h"

namespace meridian::models {

BatchNorm::BatchNorm(Shape shape, float momentum, float eps) : shape_(shape), momentum_(momentum), eps_(eps) {
  if (!(momentum >= 0.0f && momentum <= 1.0f))
    throw error::UserError("batch_norm: momentum " + number_text(momentum) + " is outside [0, 1]");
  if (!(eps > 0.0f)) throw error::UserError("batch_norm: eps " + number_text(eps) + " must be > 0");
}

std::string BatchNorm::describe() const {
  const bool images = shape_.height * shape_.width > 1;
  return std::string(images ? "batch_norm2d(" : "batch_norm1d(") + std::to_string(shape_.channels) +
         ",momentum=" + number_text(momentum_) + ",eps=" + number_text(eps_) + ")";
}

void BatchNorm::bind(std::span<float> parameters, std::span<float> gradients) {
  const std::size_t c = shape_.channels;
  gamma_ = parameters.subspan(0, c);
  beta_ = parameters.subspan(c, c);
  gamma_grad_ = gradients.subspan(0, c);
  beta_grad_ = gradients.subspan(c, c);
}

void BatchNorm::bind_state(std::span<float> state) {
  running_mean_ = state.subspan(0, shape_.channels);
  running_var_ = state.subspan(shape_.channels, shape_.channels);
}

void BatchNorm::initialize(SplitMix64&) {
  std::fill(gamma_.begin(), gamma_.end(), 1.0f);
  std::fill(beta_.begin(), beta_.end(), 0.0f);
  std::fill(running_mean_.begin(), running_mean_.end(), 0.0f);
  std::fill(running_var_.begin(), running_var_.end(), 1.0f);
}

void BatchNorm::reserve(Backend& backend, std::size_t) {
  mean_.reserve(backend, shape_.channels);
  inv_std_.reserve(backend, shape_.channels);
}

void BatchNorm::forward(Backend& backend, const float* in, float* out, std::size_t batch) {
  reserve(backend, batch);
  backend.batch_norm_forward(layout(batch), training_, in, gamma_.data(), beta_.data(), eps_, momentum_,
                             running_mean_.data(), running_var_.data(), mean_.data(), inv_std_.data(), out);
}

void BatchNorm::backward(Backend& backend, const float* in, const float*, const float* dout, float* din,
                         std::size_t batch) {
  backend.batch_norm_backward(layout(batch), training_, in, dout, gamma_.data(), mean_.data(), inv_std_.data(),
                              gamma_grad_.data(), beta_grad_.data(), din);
}

}  // namespace meridian::models
