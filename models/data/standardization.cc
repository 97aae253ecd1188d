#include "models/data/standardization.h"

#include <cmath>

namespace meridian::models::data {

Standardization Standardization::fit(std::span<const float> features, std::size_t dim) {
  Standardization s;
  const std::size_t rows = dim == 0 ? 0 : features.size() / dim;
  std::vector<double> sum(dim, 0.0), sq(dim, 0.0);
  std::vector<std::size_t> present(dim, 0);
  for (std::size_t r = 0; r < rows; ++r) {
    for (std::size_t c = 0; c < dim; ++c) {
      const float x = features[r * dim + c];
      if (std::isnan(x)) continue;
      sum[c] += x;
      ++present[c];
    }
  }
  s.mean.resize(dim);
  for (std::size_t c = 0; c < dim; ++c)
    s.mean[c] = present[c] == 0 ? 0.0f : static_cast<float>(sum[c] / static_cast<double>(present[c]));
  // Two passes: the sum of squared deviations from the mean does not cancel catastrophically the way
  // E[x^2] - E[x]^2 does for columns with a large offset (e.g. years, blood counts).
  for (std::size_t r = 0; r < rows; ++r) {
    for (std::size_t c = 0; c < dim; ++c) {
      const float x = features[r * dim + c];
      if (std::isnan(x)) continue;
      const double d = x - sum[c] / static_cast<double>(present[c]);
      sq[c] += d * d;
    }
  }
  s.stddev.resize(dim);
  for (std::size_t c = 0; c < dim; ++c) {
    const double sd = present[c] == 0 ? 0.0 : std::sqrt(sq[c] / static_cast<double>(present[c]));
    s.stddev[c] = sd > 0.0 ? static_cast<float>(sd) : 1.0f;
  }
  return s;
}

void Standardization::apply(std::span<float> features) const {
  const std::size_t dim = mean.size();
  if (dim == 0) return;
  std::vector<float> inv(dim);
  for (std::size_t c = 0; c < dim; ++c) inv[c] = 1.0f / stddev[c];
  for (std::size_t i = 0; i < features.size(); i += dim) {
    for (std::size_t c = 0; c < dim; ++c) {
      float& x = features[i + c];
      x = std::isnan(x) ? 0.0f : (x - mean[c]) * inv[c];
    }
  }
}

}  // namespace meridian::models::data
