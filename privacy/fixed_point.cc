#include "privacy/fixed_point.h"

#include <cmath>
#include <vector>

#include "error/error.h"

namespace meridian::privacy {

EncodeCounts encode(std::span<const float> values, std::span<std::uint64_t> lanes) {
  error::enforce(values.size() == lanes.size(), "fixed-point encode: sizes differ");
  EncodeCounts counts;
  constexpr double kScale = 1 << kFractionBits;
  for (std::size_t i = 0; i < values.size(); ++i) {
    const float v = values[i];
    std::int64_t q = 0;
    if (!std::isfinite(v)) {
      ++counts.non_finite;
    } else {
      // Exact: a float times a power of two is exact in double. Near the clip a float's spacing is
      // 2^14 encoded units, so comparing before rounding clips exactly the values whose rounding would.
      const double scaled = static_cast<double>(v) * kScale;
      if (scaled > static_cast<double>(kMaxEncoded)) {
        q = kMaxEncoded;
        ++counts.clipped;
      } else if (scaled < -static_cast<double>(kMaxEncoded)) {
        q = -kMaxEncoded;
        ++counts.clipped;
      } else {
        // Round to nearest, ties to even, without a libm call: for |x| < 2^51, adding and subtracting
        // 1.5 * 2^52 leaves x rounded to an integer in the current (default: to nearest even) mode.
        constexpr double kRound = 6755399441055744.0;
        q = static_cast<std::int64_t>((scaled + kRound) - kRound);
      }
    }
    lanes[i] = static_cast<std::uint64_t>(q);
  }
  return counts;
}

void decode_mean(std::span<const std::uint64_t> sum, std::size_t sites, std::span<float> out) {
  error::enforce(sum.size() == out.size(), "fixed-point decode: sizes differ");
  error::enforce(sites >= 1 && sites <= kMaxSites, "fixed-point decode: site count out of range");
  const double divisor = static_cast<double>(std::uint64_t{1} << kFractionBits) * static_cast<double>(sites);
  for (std::size_t i = 0; i < sum.size(); ++i) {
    // Sign-extend the 48-bit lane: shift its top bit into bit 63, then shift back arithmetically.
    const auto value = static_cast<std::int64_t>((sum[i] & kLaneMask) << (64 - kLaneBits)) >> (64 - kLaneBits);
    out[i] = static_cast<float>(static_cast<double>(value) / divisor);
  }
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
