// The random source of data partitioning and batch order. Built on std::mt19937_64, whose output
// sequence the C++ standard fixes, with the distributions written out here: the standard library's
// distributions are implementation-defined, and a partition or a resumed epoch order must come out
// the same on every site and after a restart, whatever standard library a binary was built with.
// Integer draws (below, shuffle) are exact everywhere; normal and dirichlet go through libm's log,
// exp and cos, which conforming C libraries compute to the last bit or very nearly so.
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <span>
#include <utility>
#include <vector>

namespace meridian::models::data {

// Not thread-safe; cheap to create, so each use draws from its own instance.
class SeededRandom {
 public:
  explicit SeededRandom(std::uint64_t seed) : engine_(seed) {}

  // A seed for an independent stream (for example one per epoch) derived from `seed` and `stream`
  // with the SplitMix64 finalizer, so nearby inputs give unrelated streams.
  static std::uint64_t derive(std::uint64_t seed, std::uint64_t stream);

  std::uint64_t next() { return engine_(); }

  // Uniform integer in [0, n), unbiased (rejection). Requires n > 0.
  std::uint64_t below(std::uint64_t n);

  // Uniform double in [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

  // Standard normal (Box-Muller; one draw per call).
  double normal();

  // A sample of Dirichlet(alpha, ..., alpha) with k components (each >= 0, summing to 1). Works in
  // log space, so tiny alphas (0.01) give a valid, highly skewed vector instead of 0/0. Requires
  // alpha > 0 and k > 0.
  std::vector<double> dirichlet(double alpha, std::size_t k);

  // Fisher-Yates shuffle.
  template <class T>
  void shuffle(std::span<T> items) {
    for (std::size_t i = items.size(); i > 1; --i) {
      std::swap(items[i - 1], items[below(i)]);
    }
  }

 private:
  // log of a Gamma(shape, 1) sample (Marsaglia-Tsang; shape < 1 through the shape + 1 boost).
  double log_gamma_sample(double shape);

  std::mt19937_64 engine_;
};

}  // namespace meridian::models::data
