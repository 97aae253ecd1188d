#include "gossip/push_sum.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace meridian::gossip {

PushSum::PushSum(DelayedMixingConfig config, MixChannel& channel, std::span<float> model, PushSumStepScale scale)
    : model_(model),
      x_(model.begin(), model.end()),
      scale_(scale),
      mixing_(config, channel, x_, {}, &w_) {}

void PushSum::refresh_model() {
  const float w = static_cast<float>(w_);
  if (static_cast<double>(w) != w_) {
    for (std::size_t i = 0; i < x_.size(); ++i) model_[i] = static_cast<float>(x_[i] / w_);
    return;
  }
  // w is a float, as on the exponential graph (sums of dyadic shares). Then the float quotient has the
  // bits of the double quotient rounded to float: double rounding is innocuous for a quotient of two
  // floats, since 53 >= 2·24 + 2 bits (Figueroa, 1995). The float division does twice the elements per
  // instruction and needs no conversions; x / 1 is x.
  if (w == 1.0f) {
    std::copy(x_.begin(), x_.end(), model_.begin());
    return;
  }
  for (std::size_t i = 0; i < x_.size(); ++i) model_[i] = x_[i] / w;
}

void PushSum::step(std::uint64_t k, std::span<const float> update) {
  if (update.size() != x_.size())
    throw std::invalid_argument("sgp: update has " + std::to_string(update.size()) + " elements, model " +
                                std::to_string(x_.size()));
  // s = w without shares in flight, so that z = x / w moves by the update itself whatever w is; with
  // w = 1 the product is exact and this is x ← x − update. With shares in flight s = w·g
  // (gossip/push_sum_step_scale.h).
  const float s = static_cast<float>(scale_.factor(w_));
  for (std::size_t i = 0; i < x_.size(); ++i) x_[i] -= s * update[i];
  mixing_.after_step(k);
  refresh_model();
}

void PushSum::step(std::uint64_t k, std::span<const float> before, std::span<const float> after) {
  if (before.size() != x_.size() || after.size() != x_.size())
    throw std::invalid_argument("sgp: the model before and after the step have " + std::to_string(before.size()) +
                                " and " + std::to_string(after.size()) + " elements, the numerator " +
                                std::to_string(x_.size()));
  const float s = static_cast<float>(scale_.factor(w_));
  for (std::size_t i = 0; i < x_.size(); ++i) {
    const float update = before[i] - after[i];
    x_[i] -= s * update;
  }
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
