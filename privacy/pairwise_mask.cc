#include "privacy/pairwise_mask.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>

#include <sodium.h>

#include "privacy/fixed_point.h"

namespace meridian::privacy {

namespace {

using Nonce = std::array<unsigned char, crypto_stream_xchacha20_NONCEBYTES>;

void put_le(unsigned char* out, std::uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out[i] = static_cast<unsigned char>(v >> (8 * i));
}

Nonce nonce_of(const MaskRound& round) {
  static_assert(crypto_stream_xchacha20_NONCEBYTES == 24);
  Nonce n{};
  put_le(n.data(), round.view_id, 8);
  put_le(n.data() + 8, round.step, 8);
  put_le(n.data() + 16, round.tag, 4);
  put_le(n.data() + 20, round.domain, 4);
  return n;
}

static_assert(std::endian::native == std::endian::little, "mask words are little-endian");

// Lanes per keystream block this loop asks for: 12 KiB of stream stays in L1 with the lanes it is
// added to. Each lane takes 6 bytes of stream: the sums are modulo 2^48 (privacy/fixed_point.h), so
// the top 16 bits of a 64-bit word would be keystream computed only to be thrown away, and the
// keystream is most of secure aggregation's CPU.
constexpr std::size_t kBlockLanes = 2048;
constexpr std::size_t kWordBytes = kLaneBits / 8;
constexpr std::size_t kChachaBlockBytes = 64;
static_assert(kLaneBits % 8 == 0 && kWordBytes <= 8);
static_assert(kBlockLanes * kWordBytes % kChachaBlockBytes == 0);

}  // namespace

void add_pair_mask(const PairKey& key, const MaskRound& round, bool subtract, std::span<std::uint64_t> lanes) {
  const Nonce nonce = nonce_of(round);
  // 8 − kWordBytes bytes of slack after the block, so that every word is read as a whole uint64.
  std::array<unsigned char, kBlockLanes * kWordBytes + 8> stream{};
  for (std::size_t begin = 0; begin < lanes.size(); begin += kBlockLanes) {
    const std::size_t count = std::min(kBlockLanes, lanes.size() - begin);
    const std::size_t bytes = count * kWordBytes;
    // The keystream from block `begin` on: XOR of zeros from that block counter on, so that blocks can
    // be produced one at a time and the stream is the same whatever the block size.
    std::memset(stream.data(), 0, bytes);
    crypto_stream_xchacha20_xor_ic(stream.data(), stream.data(), bytes, nonce.data(),
                                   begin * kWordBytes / kChachaBlockBytes, key.data());
    std::uint64_t* out = lanes.data() + begin;
    // Little-endian words on every supported host (x86-64, aarch64).
    auto word = [&](std::size_t i) {
      std::uint64_t w;
      std::memcpy(&w, stream.data() + i * kWordBytes, sizeof w);
      return w & kLaneMask;
    };
    if (subtract)
      for (std::size_t i = 0; i < count; ++i) out[i] -= word(i);
    else
      for (std::size_t i = 0; i < count; ++i) out[i] += word(i);
  }
  sodium_memzero(stream.data(), stream.size());
}

}  // namespace meridian::privacy
