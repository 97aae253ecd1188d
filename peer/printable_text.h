// Text a peer chose (federation terms, refusal reasons, addresses, regions) reduced to what is safe
// to write into a log or a terminal: printable ASCII and well-formed UTF-8 characters stay (terms
// legitimately say "P = 8·D"); every other byte (control characters and escape sequences, newlines
// that would forge a log line, malformed UTF-8, and the characters that change how text displays:
// C1 controls, line separators, bidirectional overrides) becomes "\xHH", and the result is cut to a
// bound.
//
// Thread-safety: a pure function.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace meridian::peer {

// The bound for the longest text a peer may send: a refusal reason or a term (peer/wire_codec.cc).
inline constexpr std::size_t kMaxPeerTextBytes = 16384;

// `text` with every byte not part of a printable character written as \xHH (and '\' as "\\", so
// the form reads back unambiguously), cut after `max_bytes` of input with "..." appended when longer.
std::string printable_text(std::string_view text, std::size_t max_bytes = 512);

}  // namespace meridian::peer
