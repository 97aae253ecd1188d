#include "privacy/fixed_point.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <vector>

#include "error/error.h"

namespace meridian::privacy {

namespace {

// Round to nearest, ties to even, without a libm call: for |x| < 2^51, x + 1.5 · 2^52 lies where
// doubles are the integers, so the addition rounds x (in the default rounding mode) and the sum's
// low mantissa bits, minus the constant's, are that integer in two's complement. The same constant
// turns such an integer back into a double exactly. Both directions are plain vector arithmetic.
constexpr double kRound = 6755399441055744.0;
constexpr std::int64_t kRoundBits = std::bit_cast<std::int64_t>(kRound);

// Branch-free, so that it vectorizes; compiled once per vector unit, like peer/finite_copy.cc.
[[gnu::target_clones("avx512f", "avx2", "default")]] EncodeCounts encode_values(const float* values,
                                                                               std::uint64_t* lanes, std::size_t n) {
  constexpr double kScale = 1 << kFractionBits;
  constexpr auto kMax = static_cast<double>(kMaxEncoded);
  std::uint64_t clipped = 0, non_finite = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const float v = values[i];
    const bool finite = (std::bit_cast<std::uint32_t>(v) & 0x7f800000u) != 0x7f800000u;
    // Exact: a float times a power of two is exact in double. Near the clip a float's spacing is 2^14
    // encoded units, so comparing before rounding clips exactly the values whose rounding would.
    const double scaled = static_cast<double>(v) * kScale;
    const bool out_of_range = (scaled > kMax) | (scaled < -kMax);
    const double clamped = std::min(std::max(scaled, -kMax), kMax);
    // NaN and infinity become 0: their bits are masked out.
    const double kept =
        std::bit_cast<double>(std::bit_cast<std::uint64_t>(clamped) & (std::uint64_t{0} - static_cast<std::uint64_t>(finite)));
    lanes[i] = static_cast<std::uint64_t>(std::bit_cast<std::int64_t>(kept + kRound) - kRoundBits);
    clipped += static_cast<std::uint64_t>(out_of_range & finite);
    non_finite += static_cast<std::uint64_t>(!finite);
  }
  return {clipped, non_finite};
}

[[gnu::target_clones("avx512f", "avx2", "default")]] void decode_values(const std::uint64_t* sum, double divisor,
                                                                       float* out, std::size_t n) {
  constexpr std::uint64_t kSign = std::uint64_t{1} << (kLaneBits - 1);
  for (std::size_t i = 0; i < n; ++i) {
    // The signed 48-bit value of the lane (flip the sign bit, then subtract it), as an exact double.
    const auto value = static_cast<std::int64_t>(((sum[i] & kLaneMask) ^ kSign) - kSign);
    const double exact = std::bit_cast<double>(kRoundBits + value) - kRound;
    out[i] = static_cast<float>(exact / divisor);
  }
}

}  // namespace

EncodeCounts encode(std::span<const float> values, std::span<std::uint64_t> lanes) {
  error::enforce(values.size() == lanes.size(), "fixed-point encode: sizes differ");
  return encode_values(values.data(), lanes.data(), values.size());
}

void decode_mean(std::span<const std::uint64_t> sum, std::size_t sites, std::span<float> out) {
  error::enforce(sum.size() == out.size(), "fixed-point decode: sizes differ");
  error::enforce(sites >= 1 && sites <= kMaxSites, "fixed-point decode: site count out of range");
  const double divisor = static_cast<double>(std::uint64_t{1} << kFractionBits) * static_cast<double>(sites);
  decode_values(sum.data(), divisor, out.data(), sum.size());
}

void plain_fixed_point_mean(std::span<const std::span<const float>> inputs, std::span<float> out) {
  std::vector<std::uint64_t> sum(out.size(), 0), lanes(out.size());
  for (const auto& input : inputs) {
    encode(input, lanes);
    for (std::size_t i = 0; i < sum.size(); ++i) sum[i] += lanes[i];
  }
  decode_mean(sum, inputs.size(), out);
}

}  // namespace meridian::privacy
