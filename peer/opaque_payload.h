// Mixer payloads whose words are not floats. A kCompressedShare whose phase is kOpaquePayloadPhase
// carries kOpaqueBytesPerElement bytes per element of its tensor (`total`), packed into the payload's
// 4-byte words with the last word's unused bytes zero (secure aggregation's masked shares,
// privacy/packed_share.h, which may hold any bit pattern, NaN and infinity included). The transport
// checks the framing before it accepts such a message (peer/message_validator.h: offset 0 and exactly
// opaque_words(total) words; peer/reassembler.h: the padding), so that a malformed one is refused
// before it counts as received, but never reads the bytes as floats: no finite-value check, never into
// a PayloadSink. What the bytes mean is the receiver's to check.
//
// Thread-safety: constants and pure functions.
#pragma once

#include <cstdint>

#include "peer/message.h"

namespace meridian::peer {

// Beyond the phases of gossip::Encoding and the direct exchange.
inline constexpr std::uint32_t kOpaquePayloadPhase = 0x200;
inline constexpr std::uint64_t kOpaqueBytesPerElement = 6;
// Larger tensors are refused (the byte count must not overflow).
inline constexpr std::uint64_t kMaxOpaqueElements = std::uint64_t{1} << 60;

constexpr bool has_opaque_payload(MessageKind kind, std::uint32_t phase) {
  return kind == MessageKind::kCompressedShare && phase == kOpaquePayloadPhase;
}

// The payload words of an opaque payload for a tensor of `total` elements (total <= kMaxOpaqueElements).
constexpr std::uint64_t opaque_words(std::uint64_t total) { return (total * kOpaqueBytesPerElement + 3) / 4; }

// The zero bytes after the last element in the last word.
constexpr std::uint64_t opaque_padding_bytes(std::uint64_t total) {
  return opaque_words(total) * 4 - total * kOpaqueBytesPerElement;
}

}  // namespace meridian::peer
