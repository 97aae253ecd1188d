#include "gossip/exponential_graph.h"

#include <algorithm>
#include <bit>

namespace meridian::gossip {

std::size_t exponential_graph_period(std::size_t n) {
  if (n <= 1) return 0;
  return static_cast<std::size_t>(std::bit_width(n - 1));  // ⌊log2(n−1)⌋ + 1
}

namespace {
std::vector<std::size_t> offsets(std::size_t n, std::uint64_t step, std::size_t k) {
  std::size_t len = exponential_graph_period(n);
  std::vector<std::size_t> out;
  if (len == 0) return out;
  k = std::min(k, len);
  for (std::size_t i = 0; i < k; ++i) out.push_back(std::size_t{1} << ((step + i) % len));
  return out;
}
}  // namespace

std::vector<std::size_t> exponential_out_peers(std::size_t n, std::size_t rank, std::uint64_t step, std::size_t k) {
  auto peers = offsets(n, step, k);
  for (auto& p : peers) p = (rank + p) % n;
  return peers;
}

std::vector<std::size_t> exponential_in_peers(std::size_t n, std::size_t rank, std::uint64_t step, std::size_t k) {
  auto peers = offsets(n, step, k);
  for (auto& p : peers) p = (rank + n - p) % n;
  return peers;
}

}  // namespace meridian::gossip
