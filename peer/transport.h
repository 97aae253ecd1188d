// The transport as gossip/ sees it: send a message to a named site, receive with a deadline, and ask
// which view is in force for a round. Implementations: ZeroMQ over TCP (peer/zmq_transport.h) and
// in-memory (peer/in_memory_transport.h) for in-process multi-site tests and simulations.
//
// Errors: expected outcomes are values (receive() returns nullopt on timeout; a message to a dead or
// unknown peer is dropped and counted). TransportError is thrown only when the transport itself is
// broken (closed, socket failure); the caller may drop the peer or shut down.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "peer/message.h"
#include "peer/view.h"

namespace meridian::peer {

class TransportError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
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
