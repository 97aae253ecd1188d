#include "privacy/poisson_sampler.h"

#include <cmath>
#include <limits>
#include <numeric>
#include <string>

#include "error/error.h"

namespace meridian::privacy {

PoissonSampler::PoissonSampler(std::size_t rows, double sample_rate, SecureRandom& random)
    : rows_(rows), sample_rate_(sample_rate), log_miss_(std::log1p(-sample_rate)), random_(random) {
  if (rows == 0) throw error::UserError("Poisson sampling: no examples to sample from");
  if (!(sample_rate > 0.0 && sample_rate <= 1.0))
    throw error::UserError("Poisson sampling: sample rate " + std::to_string(sample_rate) + " is not in (0, 1]");
}

std::span<const std::size_t> PoissonSampler::next() {
  batch_.clear();
  if (sample_rate_ >= 1.0) {
    batch_.resize(rows_);
    std::iota(batch_.begin(), batch_.end(), std::size_t{0});
    return batch_;
  }
  // The gap before the next chosen row is geometric: floor(log U / log(1 − q)) rows are skipped, U
  // uniform in (0, 1), which is the Bernoulli(q) test of each row in turn, done in one draw.
  std::size_t row = 0;
  while (true) {
    const double gap = std::floor(std::log(random_.uniform()) / log_miss_);
    if (gap >= static_cast<double>(rows_ - row)) break;
    row += static_cast<std::size_t>(gap);
    batch_.push_back(row);
    if (++row >= rows_) break;
  }
  return batch_;
}

}  // namespace meridian::privacy
