#include "models/data/feature_moments.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace meridian::models::data {
namespace {

// Features per group: the pixels of a channel for images, 1 for tables.
std::size_t group_width(const Dataset& data) { return data.channels > 0 ? data.height * data.width : 1; }

std::string groups_noun(const Dataset& data) { return data.channels > 0 ? "channel" : "feature"; }

// A group's per-feature table (dim) from one value per group.
std::vector<float> spread(std::span<const double> per_group, const Dataset& data) {
  const std::size_t width = group_width(data);
  std::vector<float> out(data.dim);
  for (std::size_t f = 0; f < data.dim; ++f) out[f] = static_cast<float>(per_group[f / width]);
  return out;
}

}  // namespace

std::size_t normalization_groups(const Dataset& data) { return data.channels > 0 ? data.channels : data.dim; }

FeatureMoments moments_of(const Dataset& data) {
  const std::size_t groups = normalization_groups(data);
  const std::size_t width = group_width(data);
  FeatureMoments m;
  m.count = data.rows * width;
  m.sum.assign(groups, 0.0);
  m.squared_deviations.assign(groups, 0.0);
  std::vector<std::uint64_t> missing(groups, 0);
  for (std::size_t r = 0; r < data.rows; ++r) {
    const float* row = data.row(r);
    for (std::size_t f = 0; f < data.dim; ++f) {
      if (std::isnan(row[f])) {
        ++missing[f / width];
        continue;
      }
      m.sum[f / width] += row[f];
    }
  }
  if (std::any_of(missing.begin(), missing.end(), [](std::uint64_t n) { return n > 0; })) m.missing = missing;
  std::vector<double> mean(groups, 0.0);
  for (std::size_t g = 0; g < groups; ++g)
    if (m.present(g) > 0) mean[g] = m.sum[g] / static_cast<double>(m.present(g));
  for (std::size_t r = 0; r < data.rows; ++r) {
    const float* row = data.row(r);
    for (std::size_t f = 0; f < data.dim; ++f) {
      if (std::isnan(row[f])) continue;
      const double d = row[f] - mean[f / width];
      m.squared_deviations[f / width] += d * d;
    }
  }
  return m;
}

FeatureMoments combine(std::span<const FeatureMoments> parts) {
  FeatureMoments out;
  if (parts.empty()) throw DataError("no input statistics to combine");
  const std::size_t groups = parts.front().sum.size();
  out.sum.assign(groups, 0.0);
  out.squared_deviations.assign(groups, 0.0);
  std::vector<std::uint64_t> missing(groups, 0);
  for (const auto& p : parts) {
    if (p.sum.size() != groups || p.squared_deviations.size() != groups ||
        (!p.missing.empty() && p.missing.size() != groups)) {
      throw DataError("input statistics of " + std::to_string(p.sum.size()) + " groups cannot be combined with " +
                      std::to_string(groups));
    }
    out.count += p.count;
    for (std::size_t g = 0; g < groups; ++g) {
      out.sum[g] += p.sum[g];
      missing[g] += p.count - p.present(g);
    }
  }
  if (out.count == 0) throw DataError("no site holds any training rows: no input statistics to combine");
  if (std::any_of(missing.begin(), missing.end(), [](std::uint64_t n) { return n > 0; })) out.missing = missing;
  for (std::size_t g = 0; g < groups; ++g) {
    if (out.present(g) == 0) continue;
    const double mean = out.sum[g] / static_cast<double>(out.present(g));
    double m2 = 0.0;
    for (const auto& p : parts) {
      const std::uint64_t n = p.present(g);
      if (n == 0) continue;
      const double d = p.sum[g] / static_cast<double>(n) - mean;
      m2 += p.squared_deviations[g] + static_cast<double>(n) * d * d;
    }
    out.squared_deviations[g] = m2;
  }
  return out;
}

Standardization standardization_from(const FeatureMoments& moments, const Dataset& data) {
  const std::size_t groups = moments.sum.size();
  std::vector<double> mean(groups), stddev(groups);
  for (std::size_t g = 0; g < groups; ++g) {
    const std::uint64_t present = moments.present(g);
    const double n = static_cast<double>(present);
    mean[g] = present == 0 ? 0.0 : moments.sum[g] / n;
    const double sd = present == 0 ? 0.0 : std::sqrt(moments.squared_deviations[g] / n);
    // Compared in float, as Standardization::fit does: a spread that rounds to 0 would divide by 0.
    stddev[g] = static_cast<float>(sd) > 0.0f ? sd : 1.0;
  }
  return Standardization{spread(mean, data), spread(stddev, data)};
}

Standardization standardization_from(std::span<const double> mean, std::span<const double> stddev,
                                     const Dataset& data) {
  const std::size_t groups = normalization_groups(data);
  const std::string noun = groups_noun(data);
  if (mean.size() != groups || stddev.size() != groups) {
    throw DataError("the input normalization given has " + std::to_string(mean.size()) + " means and " +
                    std::to_string(stddev.size()) + " standard deviations, the data " + std::to_string(groups) + " " +
                    noun + (groups == 1 ? "" : "s") + " (one value per " + noun + ")");
  }
  for (std::size_t g = 0; g < groups; ++g) {
    if (!(stddev[g] > 0.0) || !std::isfinite(stddev[g]) || !std::isfinite(mean[g])) {
      throw DataError("the input normalization given has standard deviation " + std::to_string(stddev[g]) +
                      " and mean " + std::to_string(mean[g]) + " for " + noun + " " + std::to_string(g + 1) +
                      " (a finite mean and a positive standard deviation are needed)");
    }
  }
  return Standardization{spread(mean, data), spread(stddev, data)};
}

}  // namespace meridian::models::data
