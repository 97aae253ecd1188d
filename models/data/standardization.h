// Per-feature standardization (z-scores): x' = (x - mean) / stddev for every column. Fitted on the
// training data and stored with it, so that validation and test data are scaled with the training
// statistics rather than their own.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

namespace meridian::models::data {

struct Standardization {
  std::vector<float> mean;    // (dim)
  std::vector<float> stddev;  // (dim), population standard deviation; never 0 (see fit)

  bool empty() const { return mean.empty(); }

  // Fits mean and standard deviation of each of the `dim` columns of the row-major `features`
  // (rows = features.size() / dim) over the values present: a NaN is a missing value and left out. A
  // constant column (or one with no value) gets stddev 1, so it maps to 0 instead of dividing by
  // zero. Accumulates in double. Requires dim > 0 and features.size() % dim == 0.
  static Standardization fit(std::span<const float> features, std::size_t dim);

  // Scales the row-major `features` in place; a missing value (NaN) becomes 0, the mean: imputation
  // with the statistics the scaling was made from (the federation's pooled mean of the values
  // present, tabular_schema.h). Requires mean.size() == dim (the caller checks it against its own
  // input and reports a mismatch).
  void apply(std::span<float> features) const;
};

}  // namespace meridian::models::data
