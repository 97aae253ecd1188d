// The time-varying directed exponential graph of SGP (docs/algorithms.md): among n ranks, rank r's peer
// list is r + 2^0, r + 2^1, ..., r + 2^⌊log2(n−1)⌋ (mod n). The offsets are distinct powers of two
// below n, so the list has no duplicates and never contains r itself. Step k uses the K consecutive
// entries starting at k mod L (L = length of the list). Every rank reaches every other within
// ⌈log2 n⌉ steps with K = 1. Pure functions; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace meridian::gossip {

// L: the length of every rank's peer list (0 when n <= 1).
std::size_t exponential_graph_period(std::size_t n);

// The ranks `rank` sends to at `step`, K of them (K is clamped to [0, L]).
std::vector<std::size_t> exponential_out_peers(std::size_t n, std::size_t rank, std::uint64_t step, std::size_t k);

// The ranks that send to `rank` at `step`: rank − offset for the same offsets, so in-degree = K.
std::vector<std::size_t> exponential_in_peers(std::size_t n, std::size_t rank, std::uint64_t step, std::size_t k);

}  // namespace meridian::gossip
