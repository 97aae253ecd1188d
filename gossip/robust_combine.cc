#include "gossip/robust_combine.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "error/error.h"

namespace meridian::gossip {

void trimmed_mean(const std::vector<std::span<const float>>& vectors, std::size_t trim, std::span<float> out,
                  double outlier_mads) {
  const std::size_t g = vectors.size();
  if (g <= 2 * trim)
    throw error::InternalError("trimmed mean of " + std::to_string(g) + " vectors cannot drop " + std::to_string(trim) +
                               " at each end");
  for (const auto& v : vectors)
    if (v.size() != out.size()) throw error::InternalError("trimmed mean: vectors of different sizes");
  // Small g: insertion sort beats std::sort's set-up, and its order is total for finite values.
  auto sort = [](std::vector<float>& v) {
    for (std::size_t a = 1; a < v.size(); ++a)
      for (std::size_t b = a; b > 0 && v[b] < v[b - 1]; --b) std::swap(v[b], v[b - 1]);
  };
  auto median = [](const std::vector<float>& sorted) {
    const std::size_t n = sorted.size();
    return n % 2 ? static_cast<double>(sorted[n / 2])
                 : 0.5 * (static_cast<double>(sorted[n / 2 - 1]) + static_cast<double>(sorted[n / 2]));
  };
  std::vector<float> column(g), deviation(g);
  for (std::size_t i = 0; i < out.size(); ++i) {
    for (std::size_t j = 0; j < g; ++j) column[j] = vectors[j][i];
    sort(column);
    std::size_t low = trim, high = g - trim;  // keep column[low, high)
    if (outlier_mads > 0 && trim > 0) {
      const double m = median(column);
      for (std::size_t j = 0; j < g; ++j) deviation[j] = static_cast<float>(std::abs(column[j] - m));
      sort(deviation);
      const double bound = outlier_mads * median(deviation);
      low = 0;
      while (low < trim && m - column[low] > bound) ++low;
      high = g;
      while (g - high < trim && column[high - 1] - m > bound) --high;
    }
    double sum = 0;
    for (std::size_t j = low; j < high; ++j) sum += column[j];
    out[i] = static_cast<float>(sum / static_cast<double>(high - low));
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
