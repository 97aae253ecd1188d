// The transport as gossip/ sees it: send a message to a named site, receive with a deadline, and ask
// which view is in force for a round. Implementations: ZeroMQ over TCP (peer/zmq/zmq_transport.h) and
// in-memory (peer/in_memory_transport.h) for in-process multi-site tests and simulations.
//
// Errors: expected outcomes are values (receive() returns nullopt on timeout; a message to a dead or
// unknown peer is dropped and counted). TransportError is thrown only when the transport itself is
// broken (closed, socket failure); the caller may drop the peer or shut down.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "error/error.h"
#include "peer/message.h"
#include "peer/payload_sink.h"
#include "peer/view.h"

namespace meridian::peer {

class TransportError : public error::PeerError {
 public:
  using error::PeerError::PeerError;
};

// What receive_into() returns: the message, and whether its payload went into the sink (then
// `msg.payload` is empty and the sink holds the combined values).
struct Received {
  Message msg;
  bool sunk = false;
};

// Thread-safety: one owner thread (the communication thread) calls every method, unless an
// implementation says otherwise.
class Transport {
 public:
  virtual ~Transport() = default;

  // This site's name.
  virtual const std::string& self() const = 0;

  // Queues `msg` for `to` and returns without waiting for the network (the WAN emulation, if any,
  // delays delivery, not this call). `msg.from` is ignored; the receiver learns the sender from the
  // connection.
  virtual void send(const std::string& to, Message msg) = 0;

  // The next mixer message (see is_mixer_kind), or nullopt when `timeout` passes first.
  [[nodiscard]] virtual std::optional<Message> receive(std::chrono::milliseconds timeout) = 0;

  // Like receive(), but when the next mixer message is one `sink` accepts (PayloadSink::accepts) and
  // its payload is all finite, the payload is combined into the sink (PayloadSink::apply) instead of
  // travelling in the message, the result is relayed if the sink says so, and the return says sunk.
  // A message the sink accepts whose payload holds a NaN or an infinity comes back not sunk with its
  // payload, for the caller to refuse (or, where the transport validates values, is dropped and
  // counted like any invalid message); the sink's `out` may then be partly combined but never holds a
  // non-finite value from it, and nothing is relayed. The default receives and then does what sink_received() does; a
  // transport that can combine straight from its network buffers overrides it.
  [[nodiscard]] virtual std::optional<Received> receive_into(const PayloadSink& sink,
                                                             std::chrono::milliseconds timeout) {
    auto msg = receive(timeout);
    if (!msg) return std::nullopt;
    return sink_received(sink, std::move(*msg));
  }

  // receive_into() for a message that already carries its payload (received earlier, or stashed):
  // when the sink accepts it and its values are finite, applies it, relays the result in the message's
  // own payload buffer (overwritten with it; no new buffer) or recycles that buffer, and returns the
  // message sunk; otherwise returns it not sunk (with a relaying sink, its payload may then be partly
  // overwritten).
  Received sink_received(const PayloadSink& sink, Message msg) {
    if (!sink.accepts(msg, msg.payload.size())) return Received{std::move(msg), false};
    // A plain copy relays the payload as it is; anything else writes the result over it.
    const bool rewrite = sink.relay && (!sink.addend.empty() || sink.scale != 1.0f);
    if (!sink.apply(std::as_bytes(std::span<const float>(msg.payload)),
                    rewrite ? std::span<float>(msg.payload) : std::span<float>()))
      return Received{std::move(msg), false};
    if (sink.relay) {
      Message next = sink.relay->header;
      next.payload = std::move(msg.payload);
      send(sink.relay->to, std::move(next));
    } else {
      recycle(std::move(msg.payload));
    }
    msg.payload = {};
    return Received{std::move(msg), true};
  }

  // The view in force at `round`: the newest announced view whose effective_round <= round.
  virtual View view_for(std::uint64_t round) const = 0;

  // Optional buffer reuse; large fresh buffers cost a page fault per 4 KiB on first touch.
  // take_buffer: a payload buffer of `elements` floats, reusing memory this transport is done with
  // when it can (contents then unspecified); by default a fresh zero-filled vector.
  virtual std::vector<float> take_buffer(std::size_t elements) { return std::vector<float>(elements); }
  // recycle: gives a received payload (or any buffer) back for reuse; by default it is just freed.
  virtual void recycle(std::vector<float>&& payload) { std::vector<float> gone(std::move(payload)); }
};

}  // namespace meridian::peer
