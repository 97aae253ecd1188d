// A destination for the payload of one expected mixer message, for Transport::receive_into(): the
// payload is combined into caller memory straight from the network buffer, so each received byte is
// read once (no reassembly copy, no separate finite-value scan, no copy from a message into a tensor).
//
// apply() computes, element by element,  out = (payload + addend) * scale  and stores the result in
// `out` and, when given, in `also_out` too (e.g. a buffer to forward along a ring). The addition and
// the scaling are skipped when `addend` is empty and `scale` is 1, so the bits are exactly those of
// the plain expression. `addend` may be `out` itself (an in-place sum); the other spans must not overlap.
//
// Thread-safety: apply() only reads the sink; the spans' memory belongs to the caller, who must keep
// it alive and untouched by others while a receive_into() call with this sink runs.
#pragma once

#include <cstddef>
#include <functional>
#include <span>

#include "peer/message.h"

namespace meridian::peer {

struct PayloadSink {
  // Which message may go into the sink, judged on its header fields only (`payload` may or may not be
  // filled when it is called; the length is checked against out.size() separately).
  std::function<bool(const Message&)> match;
  std::span<float> out;
  std::span<const float> addend;  // empty, or out.size() elements
  float scale = 1.0f;
  std::span<float> also_out;      // empty, or out.size() elements

  // Whether a message with these header fields and `elements` payload floats may go into the sink.
  bool accepts(const Message& header, std::size_t elements) const {
    return elements == out.size() && match && match(header);
  }

  // Combines `payload` (out.size() float32 values, host byte order, any alignment) into the sink.
  // Returns false, and stops, at the first block that holds a NaN or an infinity: that block and the
  // rest are never written, the blocks before it are (so a refused payload never puts a non-finite
  // value into `out`, but `out` is then partly combined). Throws std::invalid_argument when
  // payload.size() is not out.size() floats or a span has the wrong length.
  [[nodiscard]] bool apply(std::span<const std::byte> payload) const;
};

}  // namespace meridian::peer
