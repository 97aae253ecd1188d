#include "models/group_norm.h"

#include <algorithm>
#include <stdexcept>

#include "error/error.h"
#include "models/number_text.h"
#include "models/per_example_norms.h"

namespace meridian::models {

GroupNorm::GroupNorm(Shape shape, std::size_t groups, float eps) : shape_(shape), groups_(groups), eps_(eps) {
  if (groups == 0 || shape.channels % groups != 0)
    throw error::UserError("group_norm: " + std::to_string(groups) + " groups do not divide " +
                           std::to_string(shape.channels) + " channels");
  if (!(eps > 0.0f)) throw error::UserError("group_norm: eps " + number_text(eps) + " must be > 0");
}

std::string GroupNorm::describe() const {
  return "group_norm(" + std::to_string(groups_) + "," + std::to_string(shape_.channels) + ",eps=" + number_text(eps_) +
         ")";
}

void GroupNorm::bind(std::span<float> parameters, std::span<float> gradients) {
  const std::size_t c = shape_.channels;
  gamma_ = parameters.subspan(0, c);
  beta_ = parameters.subspan(c, c);
  gamma_grad_ = gradients.subspan(0, c);
  beta_grad_ = gradients.subspan(c, c);
}

void GroupNorm::initialize(SplitMix64&) {
  std::fill(gamma_.begin(), gamma_.end(), 1.0f);
  std::fill(beta_.begin(), beta_.end(), 0.0f);
}

void GroupNorm::reserve(Backend& backend, std::size_t batch) {
  mean_.reserve(backend, batch * groups_);
  inv_std_.reserve(backend, batch * groups_);
}

void GroupNorm::forward(Backend& backend, const float* in, float* out, std::size_t batch) {
  reserve(backend, batch);
  backend.group_norm_forward(layout(batch), groups_, in, gamma_.data(), beta_.data(), eps_, mean_.data(),
                             inv_std_.data(), out);
}

void GroupNorm::backward(Backend& backend, const float* in, const float*, const float* dout, float* din,
                         std::size_t batch) {
  // Tracking norms, the parameter gradients it writes on the way to din are overwritten by the next
  // ordinary backward pass: they come in the same loop as din, at no extra cost.
  if (squared_norms_ != nullptr)
    add_group_norm_norms(layout(batch), groups_, in, dout, mean_.data(), inv_std_.data(), squared_norms_);
  backend.group_norm_backward(layout(batch), groups_, in, dout, gamma_.data(), mean_.data(), inv_std_.data(),
                              gamma_grad_.data(), beta_grad_.data(), din);
}

bool GroupNorm::track_per_example_norms(double* squared_norms) {
  squared_norms_ = squared_norms;
  return true;
}

}  // namespace meridian::models
