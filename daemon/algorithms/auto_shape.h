// Shapes chosen from the network (docs/algorithms.md, "Shapes chosen from the network"): with
// --delay auto (dts), --overlap auto (diloco, diloco-gossip) or --tau auto (sgp) an algorithm takes its shape from the pace
// of the view in force (peer/pace.h: the federation's largest heartbeat round trip and step time),
// so that every site runs the same shape from the same round. The rule: the smallest shape that covers
// twice the crossing the algorithm's exchange makes, in steps of compute (diloco: 1.5 times); the margin
// that makes the sites choose again (peer::pace_moved) keeps it above 1.5 times the crossing (diloco:
// above 1.1 times).
//
//   crossing    one link crossing takes half the round trip; the direct exchange and push-sum make one
//               per exchange, the ring all-reduce 2(n − 1) in a row
//   need        ⌈2 · crossings · (rtt / 2) / step⌉ = ⌈crossings · rtt / step⌉ steps
//   dts         D = need clamped to [2, 8], P = 8·D (the shape stable with momentum; D = 1 leaves no
//               slack for sites that drift a step apart)
//   sgp         τ = need + 1, at most 32 (the mixer's bound τ − 1 covers the need, gossip/osgp_split.h)
//   diloco      τ = ⌈3 · crossings · rtt / (4 · step)⌉ (1.5 times the crossing) clamped to [1, H]: every
//               step of overlap applies the outer step a step later, which costs accuracy (τ = 19 of
//               H = 32 ended 0.5 point below τ = 12 from the same start round in docs/results.md's
//               experiment 8), and a sync waits only for what the overlap leaves uncovered, once
//               every H steps
//
// A view whose pace is not measured yet gives the algorithm's fixed default shape. Integer arithmetic
// only: every site computes the same shape from the same view.
//
// Thread-safety: pure functions and values.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "peer/pace.h"

namespace meridian::daemon::algorithms {

// The largest automatic dts D (P = 8·D); it bounds the rounds a view change takes to act.
inline constexpr std::uint32_t kAutoDtsMaxDelay = 8;
inline constexpr std::uint32_t kAutoDtsMinDelay = 2;
inline constexpr std::uint32_t kAutoSgpMaxTau = 32;

// Link crossings one exact-mean exchange takes in a row over `sites` sites: 1 for the direct exchange,
// 2(n − 1) for the ring (0 for a site alone).
std::uint64_t exchange_crossings(std::size_t sites, bool direct);

// Steps of compute that cover twice `crossings` crossings at `pace`; 0 when the pace is not measured.
std::uint64_t steps_to_cover(const peer::Pace& pace, std::uint64_t crossings);

struct DtsShape {
  std::uint32_t delay = 0;
  std::uint32_t period = 1;
  friend bool operator==(const DtsShape&, const DtsShape&) = default;
};
// `fallback` when the pace is not measured.
DtsShape choose_dts_shape(const peer::Pace& pace, std::uint64_t crossings, DtsShape fallback);
std::uint32_t choose_sgp_tau(const peer::Pace& pace, std::uint32_t fallback);
std::uint32_t choose_diloco_overlap(const peer::Pace& pace, std::uint64_t crossings, std::uint32_t inner_steps,
                                    std::uint32_t fallback);

// A shape an algorithm chose from a view, for the log, `meridian status` and /metrics.
struct ChosenShape {
  std::string text;              // "D = 3, P = 24", "tau = 4", "overlap τ = 2"
  std::uint32_t delay = 0;       // dts D, diloco τ; 0 for sgp
  std::uint32_t period = 0;      // dts P; 0 otherwise
  std::uint32_t tau = 0;         // sgp τ; 0 otherwise
  peer::Pace pace;               // the figures it came from (not measured: the default shape)
  std::uint64_t view_id = 0;     // the view whose pace it is
  std::uint64_t from_round = 0;  // the round this site switched to it
  friend bool operator==(const ChosenShape&, const ChosenShape&) = default;
};

// "round trip 120.0 ms, step 40.0 ms" or "not measured yet: the default shape".
std::string describe_pace(const peer::Pace& pace);

}  // namespace meridian::daemon::algorithms
