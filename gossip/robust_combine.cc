#include "gossip/robust_combine.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace meridian::gossip {

void trimmed_mean(const std::vector<std::span<const float>>& vectors, std::size_t trim, std::span<float> out) {
  const std::size_t g = vectors.size();
  if (g <= 2 * trim)
    throw std::invalid_argument("trimmed mean of " + std::to_string(g) + " vectors cannot drop " +
                                std::to_string(trim) + " at each end");
  for (const auto& v : vectors)
    if (v.size() != out.size()) throw std::invalid_argument("trimmed mean: vectors of different sizes");
  std::vector<float> column(g);
  const double kept = static_cast<double>(g - 2 * trim);
  for (std::size_t i = 0; i < out.size(); ++i) {
    for (std::size_t j = 0; j < g; ++j) column[j] = vectors[j][i];
    // Small g: insertion sort beats std::sort's set-up, and its order is total for finite values.
    for (std::size_t a = 1; a < g; ++a)
      for (std::size_t b = a; b > 0 && column[b] < column[b - 1]; --b) std::swap(column[b], column[b - 1]);
    double sum = 0;
    for (std::size_t j = trim; j < g - trim; ++j) sum += column[j];
    out[i] = static_cast<float>(sum / kept);
  }
}

double clip_norm(std::span<float> difference, double max_norm) {
  double sq = 0;
  for (float v : difference) sq += static_cast<double>(v) * v;
  const double norm = std::sqrt(sq);
  if (!std::isfinite(norm)) {
    std::fill(difference.begin(), difference.end(), 0.0f);
    return 0.0;
  }
  if (norm <= max_norm) return 1.0;
  const double factor = max_norm / norm;
  for (float& v : difference) v = static_cast<float>(v * factor);
  return factor;
}

}  // namespace meridian::gossip
