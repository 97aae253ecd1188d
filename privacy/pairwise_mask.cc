#include "privacy/pairwise_mask.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>

#include <sodium.h>

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

// Words per keystream block this loop asks for: 16 KiB stays in L1 with the lanes it is added to.
constexpr std::size_t kBlockWords = 2048;
constexpr std::size_t kChachaBlockBytes = 64;
static_assert(kBlockWords * 8 % kChachaBlockBytes == 0);

}  // namespace

void add_pair_mask(const PairKey& key, const MaskRound& round, bool subtract, std::span<std::uint64_t> lanes) {
  const Nonce nonce = nonce_of(round);
  std::array<std::uint64_t, kBlockWords> stream;
  for (std::size_t begin = 0; begin < lanes.size(); begin += kBlockWords) {
    const std::size_t words = std::min(kBlockWords, lanes.size() - begin);
    // The keystream of block `begin`: XOR of zeros from that block counter on, so that blocks can be
    // produced one at a time and the stream is the same whatever the block size.
    std::memset(stream.data(), 0, words * 8);
    auto* bytes = reinterpret_cast<unsigned char*>(stream.data());
    crypto_stream_xchacha20_xor_ic(bytes, bytes, words * 8, nonce.data(), begin * 8 / kChachaBlockBytes, key.data());
    std::uint64_t* out = lanes.data() + begin;
    // Little-endian words on every supported host (x86-64, aarch64).
    if (subtract)
      for (std::size_t i = 0; i < words; ++i) out[i] -= stream[i];
    else
      for (std::size_t i = 0; i < words; ++i) out[i] += stream[i];
  }
  sodium_memzero(stream.data(), sizeof stream);
}

}  // namespace meridian::privacy
