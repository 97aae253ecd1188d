#include "peer/payload_sink.h"

#include "peer/finite_copy.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>

namespace meridian::peer {

namespace {

// Work goes block by block through a small buffer that stays in L1: the payload is read from the
// network buffer once, checked, and only then combined, so a non-finite block is never written.
constexpr std::size_t kBlock = 1024;

// One instantiation per shape of the expression, so that each inner loop is branch-free and
// vectorizes; kInPlace reads the addend through `out` (they are the same memory). `out` and `copy`
// may be null; `copy` may be the source itself: each block is read before it is written.
template <bool kAdd, bool kInPlace, bool kScale>
bool combine(const std::byte* src, float* out, const float* addend, float scale, float* copy, std::size_t n) {
  alignas(64) float block[kBlock];
  for (std::size_t begin = 0; begin < n; begin += kBlock) {
    const std::size_t len = std::min(kBlock, n - begin);
    if (!copy_finite(src + begin * sizeof(float), block, len)) return false;
    if constexpr (kAdd) {
      const float* a = (kInPlace ? out : addend) + begin;
      for (std::size_t i = 0; i < len; ++i) {
        float v = block[i] + a[i];
        if constexpr (kScale) v *= scale;
        block[i] = v;
      }
    } else if constexpr (kScale) {
      for (std::size_t i = 0; i < len; ++i) block[i] *= scale;
    }
    if (out) std::memcpy(out + begin, block, len * sizeof(float));
    if (copy) std::memcpy(copy + begin, block, len * sizeof(float));
  }
  return true;
}

template <bool kAdd, bool kInPlace>
bool dispatch_scale(const std::byte* src, float* out, const float* addend, float scale, float* copy, std::size_t n) {
  return scale != 1.0f ? combine<kAdd, kInPlace, true>(src, out, addend, scale, copy, n)
                       : combine<kAdd, kInPlace, false>(src, out, addend, scale, copy, n);
}

}  // namespace

bool PayloadSink::apply(std::span<const std::byte> payload, std::span<float> copy) const {
  const std::size_t n = elements;
  if (payload.size() != n * sizeof(float))
    throw std::invalid_argument("payload sink: a payload of " + std::to_string(payload.size()) +
                                " bytes for a sink of " + std::to_string(n) + " floats");
  if ((!out.empty() && out.size() != n) || (!addend.empty() && addend.size() != n) ||
      (!copy.empty() && copy.size() != n))
    throw std::invalid_argument("payload sink: output, addend and copy must have " + std::to_string(n) +
                                " elements or none");
  if (n == 0) return true;  // empty spans may hold null pointers, which memcpy must not see
  float* o = out.empty() ? nullptr : out.data();
  float* c = copy.empty() ? nullptr : copy.data();
  if (addend.empty()) return dispatch_scale<false, false>(payload.data(), o, nullptr, scale, c, n);
  if (addend.data() == o) return dispatch_scale<true, true>(payload.data(), o, nullptr, scale, c, n);
  return dispatch_scale<true, false>(payload.data(), o, addend.data(), scale, c, n);
}

}  // namespace meridian::peer
