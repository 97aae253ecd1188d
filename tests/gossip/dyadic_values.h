// Start values for tests that check push-sum mass bit for bit: multiples of 1/16 in [0, 8) have 7
// significant bits, so shares of 1/2^k and their sums stay exact in float for many steps.
#pragma once

#include <cstddef>
#include <random>
#include <vector>

namespace meridian::gossip::testing {

// n vectors of `dim` such values, drawn from `seed`.
inline std::vector<std::vector<float>> dyadic_start(std::size_t n, std::size_t dim, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<std::vector<float>> v(n, std::vector<float>(dim));
  for (auto& s : v)
    for (auto& x : s) x = static_cast<float>(rng() % 128) / 16.0f;
  return v;
}

}  // namespace meridian::gossip::testing
