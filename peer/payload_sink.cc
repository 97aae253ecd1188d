#include "peer/payload_sink.h"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>

namespace meridian::peer {

namespace {

// Work goes block by block through a small buffer that stays in L1: the payload is read from the
// network buffer once, checked, and only then combined, so a non-finite block is never written.
constexpr std::size_t kBlock = 1024;

// Copies `n` floats (n <= kBlock) into `dst` and reports whether all are finite. Testing the exponent
// bits instead of calling std::isfinite keeps the loop branch-free, so the compiler vectorizes it.
bool load_finite(const std::byte* src, float* dst, std::size_t n) {
  std::memcpy(dst, src, n * sizeof(float));
  std::uint32_t bad = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint32_t bits = std::bit_cast<std::uint32_t>(dst[i]);
    bad |= static_cast<std::uint32_t>((bits & 0x7f800000u) == 0x7f800000u);
  }
  return bad == 0;
}

// One instantiation per shape of the expression, so that each inner loop is branch-free and
// vectorizes; kInPlace reads the addend through `out` (they are the same memory).
template <bool kAdd, bool kInPlace, bool kScale, bool kAlso>
bool combine(const std::byte* src, float* __restrict out, const float* __restrict addend, float scale,
             float* __restrict also, std::size_t n) {
  alignas(64) float block[kBlock];
  for (std::size_t begin = 0; begin < n; begin += kBlock) {
    const std::size_t len = std::min(kBlock, n - begin);
    if (!load_finite(src + begin * sizeof(float), block, len)) return false;
    float* o = out + begin;
    if constexpr (kAdd) {
      const float* a = kInPlace ? o : addend + begin;
      for (std::size_t i = 0; i < len; ++i) {
        float v = block[i] + a[i];
        if constexpr (kScale) v *= scale;
        block[i] = v;
      }
    } else if constexpr (kScale) {
      for (std::size_t i = 0; i < len; ++i) block[i] *= scale;
    }
    std::memcpy(o, block, len * sizeof(float));
    if constexpr (kAlso) std::memcpy(also + begin, block, len * sizeof(float));
  }
  return true;
}

template <bool kAdd, bool kInPlace>
bool dispatch_scale_also(const std::byte* src, float* out, const float* addend, float scale, float* also,
                         std::size_t n) {
  const bool scaled = scale != 1.0f;
  if (also)
    return scaled ? combine<kAdd, kInPlace, true, true>(src, out, addend, scale, also, n)
                  : combine<kAdd, kInPlace, false, true>(src, out, addend, scale, also, n);
  return scaled ? combine<kAdd, kInPlace, true, false>(src, out, addend, scale, nullptr, n)
                : combine<kAdd, kInPlace, false, false>(src, out, addend, scale, nullptr, n);
}

}  // namespace

bool PayloadSink::apply(std::span<const std::byte> payload) const {
  const std::size_t n = out.size();
  if (payload.size() != n * sizeof(float))
    throw std::invalid_argument("payload sink: a payload of " + std::to_string(payload.size()) +
                                " bytes for a sink of " + std::to_string(n) + " floats");
  if ((!addend.empty() && addend.size() != n) || (!also_out.empty() && also_out.size() != n))
    throw std::invalid_argument("payload sink: addend and second output must have " + std::to_string(n) +
                                " elements like the output");
  if (n == 0) return true;  // empty spans may hold null pointers, which memcpy must not see
  float* also = also_out.empty() ? nullptr : also_out.data();
  if (addend.empty()) return dispatch_scale_also<false, false>(payload.data(), out.data(), nullptr, scale, also, n);
  if (addend.data() == out.data())
    return dispatch_scale_also<true, true>(payload.data(), out.data(), nullptr, scale, also, n);
  return dispatch_scale_also<true, false>(payload.data(), out.data(), addend.data(), scale, also, n);
}

}  // namespace meridian::peer
