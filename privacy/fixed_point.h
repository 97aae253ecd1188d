// The fixed-point encoding secure aggregation sums in: a value v becomes the integer round(v · 2^24)
// (ties to even), kept modulo 2^48 in a 64-bit lane. Sums of lanes are exact integer sums, so the mean
// of a round is the same number whatever order shares arrive in, with or without masks: the masked
// mean equals the unmasked fixed-point mean bit for bit, on every site.
//
// Range: |v| is clipped to kClip = (2^37 − 1) / 2^24 (about 8192) and a round has at most kMaxSites =
// 1024 members, so a sum stays within ±(2^47 − 1024) and its 48-bit two's complement is never
// ambiguous. Resolution 2^-24 (about 6e-8) absolute. A clipped value and a NaN or infinity (sent as 0)
// are counted, never silently changed.
//
// On the wire a lane travels as 6 bytes (privacy/packed_share.h).
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <span>

namespace meridian::privacy {

inline constexpr int kFractionBits = 24;
inline constexpr int kLaneBits = 48;
inline constexpr std::uint64_t kLaneMask = (std::uint64_t{1} << kLaneBits) - 1;
inline constexpr std::size_t kMaxSites = 1024;
// The largest encoded magnitude: kMaxSites of them sum below 2^47.
inline constexpr std::int64_t kMaxEncoded = (std::int64_t{1} << 37) - 1;
inline constexpr double kClip = static_cast<double>(kMaxEncoded) / (1 << kFractionBits);

struct EncodeCounts {
  std::uint64_t clipped = 0;     // |v| > kClip, encoded as ±kClip
  std::uint64_t non_finite = 0;  // NaN or ±infinity, encoded as 0
  EncodeCounts& operator+=(const EncodeCounts& o) {
    clipped += o.clipped;
    non_finite += o.non_finite;
    return *this;
  }
};

// lanes[i] = the encoding of values[i] (two's complement modulo 2^64). Sizes must be equal. Returns
// what it had to clip or replace.
EncodeCounts encode(std::span<const float> values, std::span<std::uint64_t> lanes);

// out[i] = (the signed 48-bit value of sum[i]) / 2^24 / sites, rounded once from double to float: the
// mean of `sites` encoded values whose lanes were summed (modulo 2^48 or any multiple of it). Sizes must
// be equal; 1 <= sites <= kMaxSites.
void decode_mean(std::span<const std::uint64_t> sum, std::size_t sites, std::span<float> out);

// The fixed-point mean of several sites' values without any masking: what a secure round must give
// bit for bit (tests, benches). Every input has out.size() values.
void plain_fixed_point_mean(std::span<const std::span<const float>> inputs, std::span<float> out);

}  // namespace meridian::privacy
