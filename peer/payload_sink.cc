#include "peer/payload_sink.h"

#include "error/error.h"
#include "peer/finite_copy.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>

namespace meridian::peer {

namespace {

// Work goes block by block, each small enough to stay in L1 between its two reads: the first only
// checks that the block is finite (so a non-finite block is never written anywhere), the second
// combines it straight into the first destination; a second destination is copied from the first
// while both are still in cache. The payload thus crosses the memory bus once and no staging buffer
// is written and read back.
constexpr std::size_t kBlock = 1024;

// One instantiation per shape of the expression, so that each inner loop is branch-free and
// vectorizes; kInPlace reads the addend through `out` (they are the same memory). `out` and `copy`
// may be null; `copy` may be the source itself: each element is read before it is written.
template <bool kAdd, bool kInPlace, bool kScale>
[[gnu::always_inline]] inline bool combine(const std::byte* src, float* out, const float* addend, float scale,
                                           float* copy, std::size_t n) {
  float* first = out ? out : copy;
  float* second = out ? copy : nullptr;
  if (!first) return all_finite(src, n);
  for (std::size_t begin = 0; begin < n; begin += kBlock) {
    const std::size_t len = std::min(kBlock, n - begin);
    const std::byte* s = src + begin * sizeof(float);
    if (!all_finite(s, len)) return false;
    float* d = first + begin;
    const float* a = nullptr;
    if constexpr (kAdd) a = (kInPlace ? out : addend) + begin;
    for (std::size_t i = 0; i < len; ++i) {
      float v;
      std::memcpy(&v, s + i * sizeof(float), sizeof v);
      if constexpr (kAdd) v += a[i];
      if constexpr (kScale) v *= scale;
      d[i] = v;
    }
    if (second) std::memcpy(second + begin, d, len * sizeof(float));
  }
  return true;
}

// Every shape, compiled once per vector unit (AVX-512, AVX2, and the baseline SSE2 that the build
// targets); the loader picks the widest the CPU has. The loops only add, multiply and compare,
// element by element in IEEE single precision, so each clone gives the same bits: sites on different
// CPUs still agree exactly.
[[gnu::target_clones("avx512f", "avx2", "default")]] bool combine_shape(bool add, bool in_place, const std::byte* src,
                                                                        float* out, const float* addend, float scale,
                                                                        float* copy, std::size_t n) {
  const bool scaled = scale != 1.0f;
  if (!add)
    return scaled ? combine<false, false, true>(src, out, nullptr, scale, copy, n)
                  : combine<false, false, false>(src, out, nullptr, scale, copy, n);
  if (in_place)
    return scaled ? combine<true, true, true>(src, out, nullptr, scale, copy, n)
                  : combine<true, true, false>(src, out, nullptr, scale, copy, n);
  return scaled ? combine<true, false, true>(src, out, addend, scale, copy, n)
                : combine<true, false, false>(src, out, addend, scale, copy, n);
}

}  // namespace

bool PayloadSink::apply(std::span<const std::byte> payload, std::span<float> copy) const {
  const std::size_t n = elements;
  if (payload.size() != n * sizeof(float))
    throw error::PeerError("payload sink: a payload of " + std::to_string(payload.size()) + " bytes for a sink of " +
                           std::to_string(n) + " floats");
  if ((!out.empty() && out.size() != n) || (!addend.empty() && addend.size() != n) ||
      (!copy.empty() && copy.size() != n))
    throw error::InternalError("payload sink: output, addend and copy must have " + std::to_string(n) +
                               " elements or none");
  if (n == 0) return true;  // empty spans may hold null pointers, which memcpy must not see
  float* o = out.empty() ? nullptr : out.data();
  float* c = copy.empty() ? nullptr : copy.data();
  const bool add = !addend.empty();
  return combine_shape(add, add && addend.data() == o, payload.data(), o, add ? addend.data() : nullptr, scale, c, n);
}

}  // namespace meridian::peer
