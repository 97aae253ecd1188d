// The network figures that automatic shapes are chosen from (--delay auto, --tau auto, diloco's
// overlap: docs/algorithms.md, "Shapes chosen from the network"), and when they have moved enough to
// choose again.
//
// Every site shares its own figures in its heartbeats (peer/membership_messages.h); a view carries the
// federation's largest ones (peer/view.h), put there by the site that proposed it, so that every site
// derives the same shape from the same view and switches to it at the view's effective round.
//
// Thread-safety: plain values; the functions are pure.
#pragma once

#include <compare>
#include <cstdint>

namespace meridian::peer {

struct Pace {
  std::uint64_t rtt_us = 0;   // the largest smoothed heartbeat round trip between members, µs; 0: not measured
  std::uint64_t step_us = 0;  // the largest compute time of a training step (waits excluded), µs; 0: not measured
  bool measured() const { return rtt_us != 0 && step_us != 0; }
  friend auto operator<=>(const Pace&, const Pace&) = default;
};

// The largest figure a Pace may hold (an hour); a view or heartbeat carrying more is malformed.
inline constexpr std::uint64_t kMaxPaceMicros = 3'600'000'000;

// Whether `measured` calls for a new view replacing the `agreed` pace (the margin of docs/algorithms.md):
// always when `agreed` is not measured and `measured` is; never when `measured` is not. Otherwise when
// the round trip in steps of compute (rtt / step) grew by more than a third (a shape chosen to cover
// twice the crossing then covers less than 1.5 times it) or fell below half (a shape half as large
// would cover it), unless both are under a quarter of a step (every shape is at its smallest there).
bool pace_moved(const Pace& agreed, const Pace& measured);

}  // namespace meridian::peer
