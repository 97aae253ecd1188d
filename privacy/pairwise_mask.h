// Masks that cancel in a sum: for one round, the two sites of a pair expand their pair secret
// (privacy/pair_keys.h) with XChaCha20 (libsodium's crypto_stream_xchacha20) into the same stream of
// 64-bit words; the site whose name sorts first adds the stream to its share, the other subtracts it.
// Summed over every member of the round, every pair's stream appears once with each sign, so the masks
// cancel exactly in modular arithmetic (privacy/fixed_point.h reduces to its lane width, which divides
// 2^64).
//
// The stream's nonce is the round: view, step, tag and a domain that tells apart collectives keyed
// alike (the whole view, a dsync group). A round redone in a newer view therefore gets fresh masks,
// and no two rounds of a pair ever reuse a stream.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <span>

#include "privacy/pair_keys.h"

namespace meridian::privacy {

struct MaskRound {
  std::uint64_t view_id = 0;
  std::uint64_t step = 0;
  std::uint32_t tag = 0;
  std::uint32_t domain = 0;  // which collective of the round (0: the whole view, 1: a dsync group)
};

// lanes[i] += stream[i] (or -= with `subtract`), modulo 2^64, where stream is the pair's stream of
// 64-bit little-endian words for `round`.
void add_pair_mask(const PairKey& key, const MaskRound& round, bool subtract, std::span<std::uint64_t> lanes);

}  // namespace meridian::privacy
