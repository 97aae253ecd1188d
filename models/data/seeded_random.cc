#include "models/data/seeded_random.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace meridian::models::data {

std::uint64_t SeededRandom::derive(std::uint64_t seed, std::uint64_t stream) {
  std::uint64_t z = seed + 0x9E3779B97F4A7C15ull * (stream + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

std::uint64_t SeededRandom::below(std::uint64_t n) {
  // Values below 2^64 mod n would make the low residues more likely; drawing again removes the bias.
  const std::uint64_t threshold = (0 - n) % n;
  while (true) {
    const std::uint64_t x = next();
    if (x >= threshold) return x % n;
  }
}

double SeededRandom::normal() {
  const double u1 = 1.0 - uniform();  // (0, 1]: log is finite
  const double u2 = uniform();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

double SeededRandom::log_gamma_sample(double shape) {
  if (shape < 1.0) {
    // Gamma(a) = Gamma(a + 1) * U^(1/a); in logs the U factor cannot underflow.
    const double u = 1.0 - uniform();
    return log_gamma_sample(shape + 1.0) + std::log(u) / shape;
  }
  const double d = shape - 1.0 / 3.0;
  const double c = 1.0 / std::sqrt(9.0 * d);
  while (true) {
    double x = 0, v = 0;
    do {
      x = normal();
      v = 1.0 + c * x;
    } while (v <= 0.0);
    v = v * v * v;
    const double u = 1.0 - uniform();
    if (std::log(u) < 0.5 * x * x + d - d * v + d * std::log(v)) return std::log(d * v);
  }
}

std::vector<double> SeededRandom::dirichlet(double alpha, std::size_t k) {
  std::vector<double> logs(k);
  for (auto& l : logs) l = log_gamma_sample(alpha);
  const double top = *std::max_element(logs.begin(), logs.end());
  double sum = 0;
  for (auto& l : logs) {
    l = std::exp(l - top);
    sum += l;
  }
  for (auto& l : logs) l /= sum;
  return logs;
}

}  // namespace meridian::models::data
