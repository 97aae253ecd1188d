// Poisson sampling of DP-SGD's batches, exactly as the accountant assumes (privacy/rdp_accountant.h):
// every step, each of the `rows` local examples joins the batch independently with probability q, the
// sample rate. The batch size is therefore random (binomial, mean q·rows) and may be 0; an epoch is a
// number of steps (1/q of them on average), not a pass over a permutation. Shuffled fixed-size batches
// would be a different mechanism, which the accountant's figures do not cover.
//
// The draws come from a SecureRandom: which examples a step used must stay unknown to whoever sees its
// result. Rows are found by geometric gaps between chosen rows (a gap of k with probability (1−q)^k·q), so
// a step costs O(batch), not O(rows).
//
// Borrows the generator, which must outlive the sampler. Not thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "privacy/secure_random.h"

namespace meridian::privacy {

class PoissonSampler {
 public:
  // Throws error::UserError when rows == 0 or the sample rate is not in (0, 1].
  PoissonSampler(std::size_t rows, double sample_rate, SecureRandom& random);

  // The rows of the next step, ascending; valid until the next call. Allocates only when a batch is
  // larger than every one before.
  std::span<const std::size_t> next();

  double sample_rate() const { return sample_rate_; }
  std::size_t rows() const { return rows_; }

 private:
  std::size_t rows_;
  double sample_rate_;
  double log_miss_;  // log(1 − q), < 0; unused when q = 1
  SecureRandom& random_;
  std::vector<std::size_t> batch_;
};

}  // namespace meridian::privacy
