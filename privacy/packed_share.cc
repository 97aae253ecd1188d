#include "privacy/packed_share.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>

#include "error/error.h"
#include "privacy/fixed_point.h"

namespace meridian::privacy {

namespace {

static_assert(std::endian::native == std::endian::little, "packed lanes are little-endian");
static_assert(kPackedLaneBytes * 8 == kLaneBits);

// The two planes of a share of `total` lanes inside its words.
std::byte* low_plane(std::span<float> words) { return reinterpret_cast<std::byte*>(words.data()); }
std::byte* high_plane(std::span<float> words, std::size_t total) { return low_plane(words) + 4 * total; }
const std::byte* low_plane(std::span<const float> words) { return reinterpret_cast<const std::byte*>(words.data()); }
const std::byte* high_plane(std::span<const float> words, std::size_t total) { return low_plane(words) + 4 * total; }

// The loops below read and write the planes through memcpy of whole elements, which compilers turn into
// plain (vector) loads and stores: the payload's float storage is only ever accessed as bytes.
// Compiled once per vector unit, like peer/finite_copy.cc.
[[gnu::target_clones("avx512f", "avx2", "default")]] void pack_block(const std::uint64_t* lanes, std::size_t count,
                                                                     std::byte* low, std::byte* high) {
  for (std::size_t i = 0; i < count; ++i) {
    const auto lo = static_cast<std::uint32_t>(lanes[i]);
    const auto hi = static_cast<std::uint16_t>(lanes[i] >> 32);
    std::memcpy(low + 4 * i, &lo, 4);
    std::memcpy(high + 2 * i, &hi, 2);
  }
}

// sum[i] += the lane of index i in the planes.
[[gnu::target_clones("avx512f", "avx2", "default")]] void add_block(const std::byte* low, const std::byte* high,
                                                                    std::size_t count, std::uint64_t* sum) {
  for (std::size_t i = 0; i < count; ++i) {
    std::uint32_t lo;
    std::uint16_t hi;
    std::memcpy(&lo, low + 4 * i, 4);
    std::memcpy(&hi, high + 2 * i, 2);
    sum[i] += static_cast<std::uint64_t>(lo) | (static_cast<std::uint64_t>(hi) << 32);
  }
}

}  // namespace

void pack_lanes(std::span<const std::uint64_t> block, std::size_t first, std::size_t total, std::span<float> words) {
  error::enforce(words.size() == packed_words(total) && first <= total && block.size() <= total - first,
                 "pack_lanes: a block outside the share, or words of another length");
  pack_block(block.data(), block.size(), low_plane(words) + 4 * first, high_plane(words, total) + 2 * first);
  if (first + block.size() == total && total % 2 == 1) std::memset(high_plane(words, total) + 2 * total, 0, 2);
}

bool is_packed_share(std::span<const float> words, std::size_t lanes) {
  if (words.size() != packed_words(lanes)) return false;
  if (lanes % 2 == 0) return true;
  const std::byte* padding = high_plane(words, lanes) + 2 * lanes;
  return padding[0] == std::byte{0} && padding[1] == std::byte{0};
}

void decode_packed_mean(std::span<const std::uint64_t> own, std::span<const std::span<const float>> shares,
                        std::span<float> out) {
  const std::size_t n = out.size();
  error::enforce(own.size() == n, "decode_packed_mean: sizes differ");
  for (const auto& share : shares)
    error::enforce(share.size() == packed_words(n), "decode_packed_mean: a share of another length");
  // Block by block, so that the partial sums stay in L1 while every share adds into them.
  constexpr std::size_t kBlock = 2048;
  std::array<std::uint64_t, kBlock> sum;
  for (std::size_t begin = 0; begin < n; begin += kBlock) {
    const std::size_t count = std::min(kBlock, n - begin);
    std::copy_n(own.data() + begin, count, sum.data());
    for (const auto& share : shares)
      add_block(low_plane(share) + 4 * begin, high_plane(share, n) + 2 * begin, count, sum.data());
    decode_mean({sum.data(), count}, shares.size() + 1, out.subspan(begin, count));
  }
}

}  // namespace meridian::privacy
