#include "daemon/backend/backend_push_sum.h"

#include <cmath>
#include <stdexcept>
#include <string>

#include "error/error.h"

namespace meridian::daemon {

BackendPushSum::BackendPushSum(gossip::DelayedMixingConfig config, gossip::MixChannel& channel, models::Model& model,
                               gossip::PushSumStepScale scale)
    : model_(model),
      x_(model.backend(), model.parameter_count()),
      scale_(scale),
      store_(model.backend(), x_.span(), make_async_parameter_copy(model.backend(), model.parameter_count())),
      mixing_(config, channel, store_, {}, &w_) {
  model.backend().copy(x_.data(), model.parameters().data(), x_.size() * sizeof(float));
}

void BackendPushSum::refresh_model() {
  models::Backend& backend = model_.backend();
  float* z = model_.parameters().data();
  backend.copy(z, x_.data(), x_.size() * sizeof(float));
  backend.push_sum_scale(x_.size(), z, static_cast<float>(1.0 / w_));
}

void BackendPushSum::step(std::uint64_t k, float* before) {
  models::Backend& backend = model_.backend();
  const std::size_t n = x_.size();
  // x − s·(before − z) (gossip/push_sum_step_scale.h says why s), rounded as gossip::PushSum rounds it:
  // before ← −before (exact), before ← before + z (= −(before − z), the same rounding), before ←
  // s·before (the same product up to its sign), x ← x + before.
  backend.push_sum_scale(n, before, -1.0f);
  backend.push_sum_add(n, before, model_.parameters().data());
  const double s = scale_.factor(w_);
  if (s != 1.0) backend.push_sum_scale(n, before, static_cast<float>(s));
  backend.push_sum_add(n, x_.data(), before);
  mixing_.after_step(k);
  refresh_model();
}

void BackendPushSum::finish() {
  mixing_.finish();
  refresh_model();
}

void BackendPushSum::restore(std::span<const float> numerator, double weight, double weight_average) {
  if (numerator.size() != x_.size())
    throw error::UserError("sgp: checkpoint numerator has " + std::to_string(numerator.size()) + " elements, model " +
                           std::to_string(x_.size()));
  if (!std::isfinite(weight) || weight <= 0.0)
    throw error::UserError("sgp: checkpoint push-sum weight " + std::to_string(weight) + " is not positive");
  scale_.resume(weight_average);
  model_.backend().copy_from_host(x_.data(), numerator.data(), numerator.size_bytes());
  w_ = weight;
  refresh_model();
}

std::span<const float> BackendPushSum::numerator() {
  host_x_.resize(x_.size());
  model_.backend().copy_to_host(host_x_.data(), x_.data(), x_.size() * sizeof(float));
  return host_x_;
}

}  // namespace meridian::daemon
