#include "gossip/push_sum.h"

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
  for (std::size_t i = 0; i < x_.size(); ++i) x_[i] -= update[i];
  mixing_.after_step(k);
  refresh_model();
}

void PushSum::finish() {
  mixing_.finish();
  refresh_model();
}

}  // namespace meridian::gossip
