// SplitMix64 (Steele, Lea, Flood 2014): a tiny, fast generator with a fixed algorithm, so the same
// seed gives the same initial weights and the same batch order on every site and with any standard
// library (std::uniform_*_distribution is implementation-defined). Not thread-safe; copy per thread.
#pragma once

#include <cstdint>

namespace meridian::models {

class SplitMix64 {
 public:
  explicit SplitMix64(std::uint64_t seed) : state_(seed) {}

  std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  // Uniform in [-bound, bound): 24 random bits, so every value is an exact float.
  float uniform(float bound) {
    const float unit = static_cast<float>(next() >> 40) * (1.0f / 16777216.0f);
    return (2.0f * unit - 1.0f) * bound;
  }
  // Uniform integer in [0, n), n >= 1 (Lemire's multiply-shift; the bias is below 2^-32 for n < 2^32).
  std::uint64_t below(std::uint64_t n) {
    return static_cast<std::uint64_t>((static_cast<unsigned __int128>(next()) * n) >> 64);
  }

 private:
  std::uint64_t state_;
};

}  // namespace meridian::models
