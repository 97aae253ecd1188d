// Seeded weight initialization (He or Xavier uniform) drawn from SplitMix64, so every site built
// from the same source draws the same initial model from the same seed.
#pragma once

#include <cstddef>
#include <span>

#include "models/split_mix64.h"

namespace meridian::models {

enum class InitScheme {
  he,      // He/Kaiming uniform, bound sqrt(6 / fan_in): for layers followed by ReLU
  xavier,  // Xavier/Glorot uniform, bound sqrt(6 / (fan_in + fan_out)): for the output layer
};

// Fills a layer's weights for the given fan-in/fan-out; biases are the caller's (zero).
void initialize_weights(std::span<float> weights, InitScheme scheme, std::size_t fan_in, std::size_t fan_out,
                        SplitMix64& random);

}  // namespace meridian::models
