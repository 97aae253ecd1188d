// Emulates WAN links on a site's send path (docs/wan-emulation.md): for each destination, decides when a
// message handed to the network now would arrive, or that it is lost. Each destination is one link
// with a FIFO queue: a message leaves after the ones before it have been serialized,
//   departure = max(now, link_free) + bytes * 8 / bandwidth
//   delivery  = max(departure + latency ± jitter, previous delivery on this link)
// so jitter never reorders a link. The transport holds the message (for example in a DelayQueue)
// until the delivery time and then really sends it.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <random>
#include <string>

#include "peer/link_spec.h"

namespace meridian::peer {

// Not thread-safe: owned by the thread that sends (the communication thread). Time is passed in, so
// tests drive it with a fake clock.
class LinkEmulator {
 public:
  using Clock = std::chrono::steady_clock;

  // `seed` fixes the jitter and loss draws: the same seed and the same calls give the same schedule.
  explicit LinkEmulator(std::uint64_t seed = 0);

  // When a message of `bytes` bytes handed to the link towards `to` at `now` is delivered, or nullopt
  // when it is lost. A lost message still occupies the link for its serialization time (it was sent;
  // the network dropped it) but does not hold back later deliveries. Jitter is uniform in
  // [-jitter, +jitter] and never makes delivery earlier than departure. `now` should not go back in
  // time between calls for the same destination; if it does, FIFO order is still kept.
  [[nodiscard]] std::optional<Clock::time_point> schedule(const std::string& to, const LinkSpec& link,
                                                          std::size_t bytes, Clock::time_point now);

  // Forgets the state of the link to `to` (its queue and last delivery), for a peer that left.
  void forget(const std::string& to);

  // Messages scheduled and messages lost so far, over all links.
  std::uint64_t scheduled() const { return scheduled_; }
  std::uint64_t lost() const { return lost_; }

 private:
  struct LinkState {
    Clock::time_point free_at{};        // when the sender's side of the link finishes serializing
    Clock::time_point last_delivery{};  // delivery time of the last message not lost
  };

  std::map<std::string, LinkState, std::less<>> links_;
  std::mt19937_64 rng_;
  std::uint64_t scheduled_ = 0;
  std::uint64_t lost_ = 0;
};

}  // namespace meridian::peer
