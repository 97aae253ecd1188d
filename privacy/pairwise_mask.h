// Masks that cancel in a sum: for one round, the two sites of a pair expand their pair secret
// (privacy/pair_keys.h) with XChaCha20 (libsodium's crypto_stream_xchacha20) into the same stream of
// 48-bit words (6 bytes each, little-endian: the lane width of privacy/fixed_point.h, so no keystream
// is spent on bits the sum drops); the site whose name sorts first adds the stream to its share, the
// other subtracts it. Summed over every member of the round, every pair's stream appears once with
// each sign, so the masks cancel exactly in modular arithmetic, and each masked lane is uniform
// modulo 2^48.
//
// The stream's nonce is the round: view, step, tag and a domain that tells apart collectives keyed
// alike (the whole view, a dsync group). A round redone in a newer view therefore gets fresh masks,
// and no two rounds of a pair ever reuse a stream.
//
// Thread-safety: pure functions.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "privacy/pair_keys.h"

namespace meridian::privacy {

struct MaskRound {
  std::uint64_t view_id = 0;
  std::uint64_t step = 0;
  std::uint32_t tag = 0;
  std::uint32_t domain = 0;  // which collective of the round (0: the whole view, 1: a dsync group)
};

// lanes[i] += stream[i] (or -= with `subtract`), modulo 2^64, where stream is the pair's stream of
// 48-bit little-endian words for `round`.
void add_pair_mask(const PairKey& key, const MaskRound& round, bool subtract, std::span<std::uint64_t> lanes);

// One site's masks for one round, a block of lanes at a time: for every other member of `group`
// (sorted names, `self` among them), the pair's stream, added when `self` sorts first, subtracted
// otherwise, as add_pair_mask() draws it. Each pair's round key (XChaCha20's HChaCha20 step) is derived
// once, and one keystream buffer serves every pair and block, so that a tensor can be masked block by
// block while its lanes are in cache.
//
// Thread-safety: none. Holds round keys derived from the pair secrets and wipes them, and its
// keystream buffer, when destroyed. Throws PairKeyError (privacy/pair_keys.h) when a member's key is
// unusable.
class RoundMasks {
 public:
  // Lanes per add() call at most; a block's first lane must be a multiple of kLaneAlignment.
  static constexpr std::size_t kBlockLanes = 1024;
  static constexpr std::size_t kLaneAlignment = 32;

  RoundMasks(const std::string& self, const std::vector<std::string>& group, PairKeys& keys, const MaskRound& round);
  ~RoundMasks();
  RoundMasks(const RoundMasks&) = delete;
  RoundMasks& operator=(const RoundMasks&) = delete;

  // lanes[i] += the sum of this site's signed pair streams at lane first_lane + i, modulo 2^64. Throws
  // error::InternalError when lanes.size() > kBlockLanes or first_lane is not aligned.
  void add(std::span<std::uint64_t> lanes, std::size_t first_lane);

 private:
  struct Pair {
    std::array<unsigned char, 32> round_key;
    bool subtract;
  };
  std::vector<Pair> pairs_;
  std::array<unsigned char, 8> nonce_tail_;
  // The last block's keystream. 8 − 6 bytes of slack after a block, so that every 6-byte word is read
  // as a whole uint64.
  std::array<unsigned char, kBlockLanes * 6 + 8> stream_;
};

}  // namespace meridian::privacy
