#include "models/initializer.h"

#include <cmath>

namespace meridian::models {

void initialize_weights(std::span<float> weights, InitScheme scheme, std::size_t fan_in, std::size_t fan_out,
                        SplitMix64& random) {
  const double bound = scheme == InitScheme::he ? std::sqrt(6.0 / static_cast<double>(fan_in))
                                                : std::sqrt(6.0 / static_cast<double>(fan_in + fan_out));
  for (float& w : weights) w = random.uniform(static_cast<float>(bound));
}

}  // namespace meridian::models
