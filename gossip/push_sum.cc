#include "gossip/push_sum.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace meridian::gossip {

PushSum::PushSum(DelayedMixingConfig config, MixChannel& channel, std::span<float> model)
    : model_(model), x_(model.begin(), model.end()), mixing_(config, channel, x_, {}, &w_) {}

void PushSum::refresh_model() {
  for (std::size_t i = 0; i < x_.size(); ++i) model_[i] = static_cast<float>(x_[i] / w_);
}

void PushSum::step(std::uint64_t k, std::span<const float> update) {
  if (update.size() != x_.size())
    throw std::invalid_argument("sgp: update has " + std::to_string(update.size()) + " elements, model " +
                                std::to_string(x_.size()));
  // Scaled by w so that z = x / w moves by the update itself whatever w is (see push_sum.h); with w = 1
  // the product is exact and this is x ← x − update.
  const float w = static_cast<float>(w_);
  for (std::size_t i = 0; i < x_.size(); ++i) x_[i] -= w * update[i];
  mixing_.after_step(k);
  refresh_model();
}

void PushSum::restore(std::span<const float> numerator, double weight) {
  if (numerator.size() != x_.size())
    throw std::invalid_argument("sgp: checkpoint numerator has " + std::to_string(numerator.size()) +
                                " elements, model " + std::to_string(x_.size()));
  if (!std::isfinite(weight) || weight <= 0.0)
    throw std::invalid_argument("sgp: checkpoint push-sum weight " + std::to_string(weight) + " is not positive");
  std::copy(numerator.begin(), numerator.end(), x_.begin());
  w_ = weight;
  refresh_model();
}

void PushSum::finish() {
  mixing_.finish();
  refresh_model();
}

}  // namespace meridian::gossip
