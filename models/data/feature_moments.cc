#include "models/data/feature_moments.h"

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
  for (std::size_t r = 0; r < data.rows; ++r) {
    const float* row = data.row(r);
    for (std::size_t f = 0; f < data.dim; ++f) m.sum[f / width] += row[f];
  }
  if (m.count == 0) return m;
  std::vector<double> mean(groups);
  for (std::size_t g = 0; g < groups; ++g) mean[g] = m.sum[g] / static_cast<double>(m.count);
  for (std::size_t r = 0; r < data.rows; ++r) {
    const float* row = data.row(r);
    for (std::size_t f = 0; f < data.dim; ++f) {
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
  for (const auto& p : parts) {
    if (p.sum.size() != groups || p.squared_deviations.size() != groups) {
      throw DataError("input statistics of " + std::to_string(p.sum.size()) + " groups cannot be combined with " +
                      std::to_string(groups));
    }
    out.count += p.count;
    for (std::size_t g = 0; g < groups; ++g) out.sum[g] += p.sum[g];
  }
  if (out.count == 0) throw DataError("no site holds any training rows: no input statistics to combine");
  for (std::size_t g = 0; g < groups; ++g) {
    const double mean = out.sum[g] / static_cast<double>(out.count);
    double m2 = 0.0;
    for (const auto& p : parts) {
      if (p.count == 0) continue;
      const double d = p.sum[g] / static_cast<double>(p.count) - mean;
      m2 += p.squared_deviations[g] + static_cast<double>(p.count) * d * d;
    }
    out.squared_deviations[g] = m2;
  }
  return out;
}

Standardization standardization_from(const FeatureMoments& moments, const Dataset& data) {
  const std::size_t groups = moments.sum.size();
  std::vector<double> mean(groups), stddev(groups);
  for (std::size_t g = 0; g < groups; ++g) {
    const double n = static_cast<double>(moments.count);
    mean[g] = moments.count == 0 ? 0.0 : moments.sum[g] / n;
    const double sd = moments.count == 0 ? 0.0 : std::sqrt(moments.squared_deviations[g] / n);
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
