// What identifies one collective round on the wire, and how a round can end. Every mixer message
// carries the view it runs in, the training step it belongs to and a tag that tells apart several
// collectives of the same step (an algorithm's average and a periodic re-average, say).
#pragma once

#include <chrono>
#include <cstdint>
#include <stdexcept>

#include "error/error.h"

namespace meridian::gossip {

using Clock = std::chrono::steady_clock;

struct Round {
  std::uint64_t view_id = 0;
  std::uint64_t step = 0;
  std::uint32_t tag = 0;
  friend bool operator==(const Round&, const Round&) = default;
};

// Tags of the collectives Meridian runs; a message's tag must match the round it is read for.
enum class RoundTag : std::uint32_t {
  kMix = 0,        // the algorithm's own exchange (gradient average, push-sum share, group average)
  kReaverage = 1,  // periodic or post-view-change exact re-average of the parameters
};

enum class RoundStatus {
  kCompleted,  // every expected message arrived; the result is valid
  kAbandoned,  // the deadline passed first (a dead or slow site); the caller redoes it or gives up
};

// Thrown to the trainer when a mix cannot complete at all: this site was dropped from the view, or no
// new view came to redo an abandoned round in. The trainer should stop or rejoin.
class MixError : public error::PeerError {
 public:
  using error::PeerError::PeerError;
};

}  // namespace meridian::gossip
