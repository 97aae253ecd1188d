// The arithmetic of robust aggregation (gossip/robust_options.h): coordinate-wise trimmed mean and
// norm clipping of a difference. Pure functions, no state.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

namespace meridian::gossip {

// out[i] = mean of the values vectors[*][i] left after dropping up to `trim` of the smallest and up to
// `trim` of the largest. With outlier_mads = 0 exactly `trim` are dropped at each end (the classic
// trimmed mean). With outlier_mads > 0 an end value is dropped only when it lies more than
// outlier_mads median absolute deviations from the coordinate's median: an attacker's values far out
// are still cut, but a coordinate with no outlier keeps all its honest values, so the mean is not
// pulled towards the attacker's side by the honest value cut at the other end.
// The result depends only on the multiset of vectors, not their order (values are sorted and summed in
// sorted order), so every member of a group computes the same bits. Requires vectors.size() > 2·trim
// and every vector of out.size() elements; throws error::InternalError otherwise.
void trimmed_mean(const std::vector<std::span<const float>>& vectors, std::size_t trim, std::span<float> out,
                  double outlier_mads = 0.0);

// Scales `difference` in place so that its Euclidean norm is at most `max_norm`; returns the factor
// applied (1 when it was short enough). A non-finite norm clips to the zero vector.
double clip_norm(std::span<float> difference, double max_norm);

}  // namespace meridian::gossip
