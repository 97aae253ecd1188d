#include "gossip/update_scale.h"

#include <cmath>

namespace meridian::gossip {

std::optional<double> UpdateScale::on_input(std::uint32_t tag, std::span<const float> input) {
  State& s = states_[tag];
  if (s.last_output.size() != input.size()) return std::nullopt;
  double sq = 0;
  for (std::size_t i = 0; i < input.size(); ++i) {
    const double d = static_cast<double>(input[i]) - s.last_output[i];
    sq += d * d;
  }
  const double norm = std::sqrt(sq);
  // A slow average (about ten mixes): one unusually large local step must not open the gate for the
  // garbage that arrives in the same round, and the scale still follows a decaying learning rate.
  s.scale = s.scale ? 0.9 * *s.scale + 0.1 * norm : norm;
  return s.scale;
}

void UpdateScale::on_output(std::uint32_t tag, std::span<const float> output) {
  State& s = states_[tag];
  s.last_output.assign(output.begin(), output.end());
}

}  // namespace meridian::gossip
