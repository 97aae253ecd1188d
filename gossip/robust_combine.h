// The arithmetic of robust aggregation (gossip/robust_options.h): coordinate-wise trimmed mean and
// norm clipping of a difference. Pure functions, no state.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

namespace meridian::gossip {

// out[i] = mean of the values vectors[*][i] left after dropping the `trim` smallest and `trim` largest.
// The result depends only on the multiset of vectors, not their order (values are sorted and summed in
// sorted order), so every member of a group computes the same bits. Requires vectors.size() > 2·trim
// and every vector of out.size() elements; throws std::invalid_argument otherwise.
void trimmed_mean(const std::vector<std::span<const float>>& vectors, std::size_t trim, std::span<float> out);

// Scales `difference` in place so that its Euclidean norm is at most `max_norm`; returns the factor
// applied (1 when it was short enough). A non-finite norm clips to the zero vector.
double clip_norm(std::span<float> difference, double max_norm);

}  // namespace meridian::gossip
