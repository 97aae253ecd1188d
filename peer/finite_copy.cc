#include "peer/finite_copy.h"

#include <bit>
#include <cstdint>
#include <cstring>

namespace meridian::peer {

// Both are compiled once per vector unit (AVX-512, AVX2, baseline SSE2) and the loader picks the
// widest the CPU has: a received payload is checked at the speed memory delivers it.
[[gnu::target_clones("avx512f", "avx2", "default")]] bool copy_finite(const std::byte* src, float* dst, std::size_t n) {
  if (n == 0) return true;  // empty payloads may come with null pointers, which memcpy must not see
  // Block by block, each scanned right after its copy while it is in L1: a payload chunk (1 MiB) is
  // larger than L2, so a scan after the whole copy would read it all again from farther away.
  constexpr std::size_t kBlock = 2048;  // 8 KiB
  std::uint32_t bad = 0;
  for (std::size_t begin = 0; begin < n; begin += kBlock) {
    const std::size_t end = begin + kBlock < n ? begin + kBlock : n;
    std::memcpy(dst + begin, src + begin * sizeof(float), (end - begin) * sizeof(float));
    // Testing the exponent bits instead of calling std::isfinite keeps the loop branch-free, so the
    // compiler vectorizes it.
    for (std::size_t i = begin; i < end; ++i) {
      const std::uint32_t bits = std::bit_cast<std::uint32_t>(dst[i]);
      bad |= static_cast<std::uint32_t>((bits & 0x7f800000u) == 0x7f800000u);
    }
  }
  return bad == 0;
}

[[gnu::target_clones("avx512f", "avx2", "default")]] bool all_finite(const std::byte* src, std::size_t n) {
  // The same branch-free exponent test, on bits loaded straight from the (possibly unaligned) buffer.
  std::uint32_t bad = 0;
  for (std::size_t i = 0; i < n; ++i) {
    std::uint32_t bits;
    std::memcpy(&bits, src + i * sizeof(float), sizeof bits);
    bad |= static_cast<std::uint32_t>((bits & 0x7f800000u) == 0x7f800000u);
  }
  return bad == 0;
}

}  // namespace meridian::peer
