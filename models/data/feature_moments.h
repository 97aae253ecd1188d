// The moments of one site's training inputs, and their exact combination over a federation: what a
// normalization shared by every site needs, without a row leaving its site (docs/datasets.md).
//
// Moments are kept per group of inputs: per feature for tables (each CSV column is a group), per
// channel for images (every pixel of a channel belongs to its group). Each site sends its count, its
// sums and its sums of squared deviations from its own mean; combine() pools them as if all rows sat
// in one file (the parallel variance formula of Chan, Golub and LeVeque):
//   n = Σ nᵢ    mean = Σ sumᵢ / n    M2 = Σ [ M2ᵢ + nᵢ (meanᵢ − mean)² ]    stddev = √(M2 / n)
// Missing values are left out, group by group (FeatureMoments::missing).
// Squared deviations rather than raw sums of squares: E[x²] − E[x]² cancels catastrophically for
// columns with a large offset (years, blood counts), the deviations do not.
//
// Thread-safety: plain values; the functions are pure.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "models/data/dataset.h"
#include "models/data/standardization.h"

namespace meridian::models::data {

struct FeatureMoments {
  // The values present in group g: count − missing[g].
  std::uint64_t present(std::size_t g) const { return missing.empty() ? count : count - missing[g]; }

  std::uint64_t count = 0;                 // values per group (rows; rows × height × width per channel)
  std::vector<double> sum;                 // (groups) Σ x over the values present
  std::vector<double> squared_deviations;  // (groups) Σ (x − this part's mean)² over the values present
  // (groups) values missing (NaN in a table, tabular_schema.h) among `count`; empty when none is.
  // A group's statistics are over its count − missing values present, so the pooled mean is that of
  // the values present at every site: what a missing value is filled with.
  std::vector<std::uint64_t> missing;
  friend bool operator==(const FeatureMoments&, const FeatureMoments&) = default;
};

// One group per channel for image data (Dataset::channels > 0), one per feature otherwise.
std::size_t normalization_groups(const Dataset& data);

// The moments of `data`'s features (unscaled: call it before any standardization). Accumulates in
// double, in two passes.
FeatureMoments moments_of(const Dataset& data);

// The pooled moments of `parts`, in the order given: callers that must agree to the bit pass the
// parts in the same order (by site name). Throws DataError when the parts have different group counts
// (naming both) or when no part holds any value.
FeatureMoments combine(std::span<const FeatureMoments> parts);

// Per-feature standardization of `data`'s shape from pooled moments: each feature takes its group's
// mean and population standard deviation; a group with no spread gets stddev 1, as
// Standardization::fit does. Requires moments.sum.size() == normalization_groups(data).
Standardization standardization_from(const FeatureMoments& moments, const Dataset& data);

// Per-feature standardization from per-group values given by the operator (--input-mean, --input-std):
// one value per group. Throws DataError naming the counts when the lists do not have one value per
// group, or a standard deviation is not positive.
Standardization standardization_from(std::span<const double> mean, std::span<const double> stddev, const Dataset& data);

}  // namespace meridian::models::data
