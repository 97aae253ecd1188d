#include "privacy/pairwise_mask.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>

#include <sodium.h>

#include "error/error.h"
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

// lanes[i] ±= the i-th 48-bit little-endian word of `stream` (which has 2 bytes of slack after the
// last word), modulo 2^64.
void add_words(const unsigned char* stream, bool subtract, std::uint64_t* lanes, std::size_t count) {
  // Little-endian words on every supported host (x86-64, aarch64).
  auto word = [&](std::size_t i) {
    std::uint64_t w;
    std::memcpy(&w, stream + i * kWordBytes, sizeof w);
    return w & kLaneMask;
  };
  if (subtract)
    for (std::size_t i = 0; i < count; ++i) lanes[i] -= word(i);
  else
    for (std::size_t i = 0; i < count; ++i) lanes[i] += word(i);
}

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
    add_words(stream.data(), subtract, lanes.data() + begin, count);
  }
  sodium_memzero(stream.data(), stream.size());
}

static_assert(RoundMasks::kBlockLanes * kWordBytes % kChachaBlockBytes == 0);
static_assert(RoundMasks::kLaneAlignment * kWordBytes % kChachaBlockBytes == 0);
static_assert(RoundMasks::kBlockLanes % RoundMasks::kLaneAlignment == 0);
static_assert(crypto_core_hchacha20_INPUTBYTES + crypto_stream_chacha20_NONCEBYTES == crypto_stream_xchacha20_NONCEBYTES);
static_assert(crypto_core_hchacha20_OUTPUTBYTES == 32 && crypto_stream_chacha20_KEYBYTES == 32);

RoundMasks::RoundMasks(const std::string& self, const std::vector<std::string>& group, PairKeys& keys,
                       const MaskRound& round) {
  // XChaCha20 is HChaCha20 of the key and the nonce's first 16 bytes, then ChaCha20 under that round key
  // with the nonce's last 8 bytes (libsodium's crypto_stream_xchacha20_xor_ic does exactly this): the
  // round key is made once here instead of once per block.
  const Nonce nonce = nonce_of(round);
  std::copy(nonce.begin() + crypto_core_hchacha20_INPUTBYTES, nonce.end(), nonce_tail_.begin());
  for (const auto& other : group) {
    if (other == self) continue;
    Pair pair{};
    pair.subtract = other < self;
    crypto_core_hchacha20(pair.round_key.data(), nonce.data(), keys.with(other).data(), nullptr);
    pairs_.push_back(pair);
  }
  stream_.fill(0);
}

RoundMasks::~RoundMasks() {
  for (auto& pair : pairs_) sodium_memzero(pair.round_key.data(), pair.round_key.size());
  sodium_memzero(stream_.data(), stream_.size());
}

void RoundMasks::add(std::span<std::uint64_t> lanes, std::size_t first_lane) {
  error::enforce(lanes.size() <= kBlockLanes && first_lane % kLaneAlignment == 0,
                 "round masks: a block too long, or one that starts inside a ChaCha20 block");
  const std::size_t bytes = lanes.size() * kWordBytes;
  const std::uint64_t counter = first_lane * kWordBytes / kChachaBlockBytes;
  // The keystream is the XOR of zeros; reading them from a constant block leaves nothing to clear
  // between pairs and blocks (the destructor wipes what the buffer last held).
  static constexpr std::array<unsigned char, kBlockLanes * kWordBytes> kZeros{};
  for (const auto& pair : pairs_) {
    crypto_stream_chacha20_xor_ic(stream_.data(), kZeros.data(), bytes, nonce_tail_.data(), counter,
                                  pair.round_key.data());
    add_words(stream_.data(), pair.subtract, lanes.data(), lanes.size());
  }
}

}  // namespace meridian::privacy
