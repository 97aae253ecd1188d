#include "gossip/byzantine_mixer.h"

#include <algorithm>
#include <cmath>

namespace meridian::gossip {

MixReport ByzantineMixer::mix(std::uint64_t step, RoundTag tag, std::span<float> data, double& weight) {
  honest_.assign(data.begin(), data.end());
  double sq = 0;
  for (float v : data) sq += static_cast<double>(v) * v;
  const double rms = data.empty() ? 0.0 : std::sqrt(sq / static_cast<double>(data.size()));
  // The largest scale seen, not the current one: a gradient fades as the site's own model converges,
  // and garbage that fades with it would stop hurting.
  reference_rms_ = std::max(reference_rms_, rms > 0 ? rms : 1.0);
  if (direction_.size() != data.size()) {
    std::bernoulli_distribution coin;
    direction_.resize(data.size());
    for (float& d : direction_) d = coin(rng_) ? 1.0f : -1.0f;
  }
  // A fixed direction steers every mix the same way (zero-mean noise alone would average out over the
  // steps); the fresh noise makes the vectors look unlike each other.
  const auto amplitude = static_cast<float>(scale_ * reference_rms_);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = amplitude * (direction_[i] + normal(rng_));
  const double honest_weight = weight;
  const MixReport report = inner_.mix(step, tag, data, weight);
  std::copy(honest_.begin(), honest_.end(), data.begin());
  weight = honest_weight;
  return report;
}

}  // namespace meridian::gossip
