// The demultiplexer between one transport and the collectives running on it. Messages of several
// rounds (steps, tags, views) and kinds interleave on the wire; a collective asks for exactly the
// message it needs next and everything else waits in a stash until its round asks for it.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <optional>

#include "gossip/round.h"
#include "peer/transport.h"

namespace meridian::gossip {

// Thread-safety: none; owned and used by the communication thread only, like the transport it wraps.
// Does not own the transport, which must outlive it.
class Inbox {
 public:
  using Match = std::function<bool(const peer::Message&)>;

  explicit Inbox(peer::Transport& transport) : transport_(transport) {}

  peer::Transport& transport() { return transport_; }

  // The first message, stashed or arriving, for which `match` is true; messages that do not match are
  // stashed in arrival order. Returns nullopt when `deadline` passes first.
  [[nodiscard]] std::optional<peer::Message> take(const Match& match, Clock::time_point deadline);

  // Like take(), for a message whose payload should go straight into `sink` (peer::PayloadSink): the
  // first message, stashed or arriving, for which `wanted` is true. When the sink accepts it (and its
  // payload is finite) the payload is in the sink and the result says sunk; otherwise the message comes
  // back with its payload, not sunk, for the caller to refuse. `sink.match` must accept only messages
  // `wanted` accepts. Returns nullopt when `deadline` passes.
  [[nodiscard]] std::optional<peer::Received> take_into(const Match& wanted, const peer::PayloadSink& sink,
                                                        Clock::time_point deadline);

  // Moves whatever the transport has now, or within `wait`, into the stash. Returns how many arrived.
  std::size_t pump(std::chrono::milliseconds wait);

  // Drops stashed messages for which `drop` is true (late mail of a finished or abandoned round).
  // Returns how many were dropped.
  std::size_t discard_if(const Match& drop);

  // Removes and returns every stashed message for which `match` is true, in arrival order.
  std::deque<peer::Message> take_all(const Match& match);

  std::size_t stashed() const { return stash_.size(); }
  // Stashed messages dropped, oldest first, because the stash held `kMaxStashed` (mail no round ever
  // asked for, e.g. from a peer in a view this site never runs).
  std::uint64_t overflowed() const { return overflowed_; }

  static constexpr std::size_t kMaxStashed = 1 << 16;

 private:
  void stash(peer::Message msg);

  peer::Transport& transport_;
  std::deque<peer::Message> stash_;
  std::uint64_t overflowed_ = 0;
};

}  // namespace meridian::gossip
