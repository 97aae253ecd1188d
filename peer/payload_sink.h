// A destination for the payload of one expected mixer message, for Transport::receive_into(): the
// payload is combined into caller memory straight from the network buffer, so each received byte is
// read once (no reassembly copy, no separate finite-value scan, no copy from a message into a tensor).
//
// The result, element by element, is  (payload + addend) * scale ; the addition and the scaling are
// skipped when `addend` is empty and `scale` is 1, so the bits are exactly those of the plain
// expression. It goes into `out` (when given) and, with a `relay`, on to another site as the payload of
// a new message (a ring forwarding what it received or summed), which a transport may send straight
// from its receive buffer, overwritten with the result, without copying it again.
//
// Thread-safety: apply() only reads the sink; the spans' memory belongs to the caller, who must keep
// it alive and untouched by others while a receive_into() call with this sink runs.
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <span>
#include <string>

#include "peer/message.h"

namespace meridian::peer {

struct PayloadSink {
  // Where the result is sent on, and the fields of the message that carries it (its payload and
  // `from` are ignored).
  struct Relay {
    std::string to;
    Message header;
  };

  // Which message may go into the sink, judged on its header fields only (`payload` may or may not be
  // filled when it is called; the length is checked against `elements` separately).
  std::function<bool(const Message&)> match;
  std::size_t elements = 0;       // the payload length the sink takes
  std::span<float> out;           // empty, or `elements`
  std::span<const float> addend;  // empty, or `elements`; may be `out` itself (an in-place sum)
  float scale = 1.0f;
  std::optional<Relay> relay;

  // Whether a message with these header fields and `payload_elements` floats may go into the sink.
  bool accepts(const Message& header, std::size_t payload_elements) const {
    return payload_elements == elements && match && match(header);
  }

  // Combines `payload` (`elements` float32 values, host byte order, any alignment) into `out` and, when
  // `copy` is not empty (`elements` floats, which may be the payload's own memory), into `copy` too.
  // Returns false, and stops, at the first block that holds a NaN or an infinity: that block and the
  // rest are never written, the blocks before it are (so a refused payload never puts a non-finite
  // value anywhere, but the outputs are then partly written). Throws error::PeerError when the
  // payload's length is not `elements`, error::InternalError when another span's is.
  [[nodiscard]] bool apply(std::span<const std::byte> payload, std::span<float> copy = {}) const;
};

}  // namespace meridian::peer
