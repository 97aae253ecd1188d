// A masked share on the wire: n 48-bit lanes (privacy/fixed_point.h) in 6 bytes each, laid out in two
// planes so that packing and unpacking are plain vector loops: the low 32 bits of every lane as n
// little-endian uint32, then the high 16 bits of every lane as n little-endian uint16, then two zero
// bytes when n is odd. They fill the 4-byte words of an opaque payload of 6 bytes an element
// (peer/opaque_payload.h): packed_words(n) words. Every 6-byte pattern is a valid lane (a masked lane
// is uniform modulo 2^48), so what a receiver can check is the layout: the length and the zero
// padding, which the ZeroMQ transport checks before it accepts the message.
//
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "peer/opaque_payload.h"

namespace meridian::privacy {

inline constexpr std::size_t kPackedLaneBytes = 6;

static_assert(kPackedLaneBytes == peer::kOpaqueBytesPerElement);

// The payload words that carry `lanes` lanes: n + ceil(n / 2).
constexpr std::size_t packed_words(std::size_t lanes) { return peer::opaque_words(lanes); }

// Writes lanes [first, first + block.size()) of a share of `total` lanes, their low 48 bits, into its
// packed words (`words`: packed_words(total)), and the padding when the block holds the last lane. A
// share may so be packed a block at a time, in any order. Throws error::InternalError when the sizes
// do not fit.
void pack_lanes(std::span<const std::uint64_t> block, std::size_t first, std::size_t total, std::span<float> words);

// Whether `words` is a well-formed packed share of `lanes` lanes: packed_words(lanes) words, padding zero.
bool is_packed_share(std::span<const float> words, std::size_t lanes);

// out[i] = the mean of `own` lanes plus every packed share in `shares` (each is_packed_share of
// out.size() lanes), as decode_mean (privacy/fixed_point.h) with own plus the shares as the sites: one
// pass that reads each share once. Throws error::InternalError when sizes do not match.
void decode_packed_mean(std::span<const std::uint64_t> own, std::span<const std::span<const float>> shares,
                        std::span<float> out);

}  // namespace meridian::privacy
