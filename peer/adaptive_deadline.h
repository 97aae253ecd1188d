// A deadline derived from measured durations (--round-timeout auto, --heartbeat-timeout auto;
// docs/operations.md, "Deadlines from measurements").
//
// A fixed timeout guessed by hand is either too short for a slow link or a loaded machine (a live
// site is given up on) or too long for a fast one (a lost message or a dead site stalls everyone
// for it). Instead the deadline follows what the site measures, over a sliding window of the most
// recent `window` samples:
//
//   deadline = clamp(factor × median + k × MAD, floor, cap),   and at least `tail` × the largest sample
//
// where MAD is the median absolute deviation from the median. median + k·MAD is robust to a few wild
// samples (the rule hivemind's timeouts were asked to follow): it tracks a slow but regular site or
// link and widens when the durations spread. `factor` (>= 1) keeps a deadline above a duration that
// is long and regular (MAD near 0): a round of 40 s is not abandoned at 40.1 s. `tail` covers rare
// stalls that median and MAD ignore by design (a process of a loaded machine waiting seconds for a
// core): a deadline shorter than twice the longest recent stall would fire on the next one. The floor
// keeps short durations from making a deadline that a scheduler hiccup exceeds, the cap keeps a slow
// phase from making the site deaf to a real failure for long. Until `min_samples` samples are in, the
// deadline is `initial`.
//
// Samples above the deadline in force are the failures the deadline exists to detect (a dead member,
// an abandoned round), not measurements of the healthy case: the owner does not observe them (see
// the callers), or the deadline would grow after every outage and stop detecting the next.
//
// Thread-safety: every method may be called from any thread (the owner observes on its thread, status
// and metrics read from theirs).
#pragma once

#include <chrono>
#include <cstddef>
#include <deque>
#include <mutex>
#include <string>

namespace meridian::peer {

struct AdaptiveDeadlineRule {
  std::chrono::microseconds floor{0};
  std::chrono::microseconds cap{0};
  std::chrono::microseconds initial{0};  // before min_samples samples; within [floor, cap]
  double factor = 1;                     // on the median, >= 1
  double k = 8;                          // on the MAD, >= 0
  double tail = 0;                       // on the largest sample of the window, >= 0
  std::size_t window = 64;               // samples kept, >= 1
  std::size_t min_samples = 8;           // >= 1, <= window
};

// What the deadline in force came from, for the start-up line, `meridian status` and the metrics.
struct DeadlineBasis {
  std::chrono::microseconds deadline{0};
  std::size_t samples = 0;               // in the window; below min_samples: the initial deadline
  std::chrono::microseconds median{0};   // 0 while below min_samples
  std::chrono::microseconds mad{0};
  std::chrono::microseconds largest{0};
};

class AdaptiveDeadline {
 public:
  // Throws error::InternalError for a rule outside the bounds above.
  explicit AdaptiveDeadline(AdaptiveDeadlineRule rule);

  // One measured duration (negative ones count as 0). Recomputes the deadline.
  void observe(std::chrono::microseconds sample);
  // The deadline in force.
  std::chrono::microseconds deadline() const;
  DeadlineBasis basis() const;
  const AdaptiveDeadlineRule& rule() const { return rule_; }

 private:
  const AdaptiveDeadlineRule rule_;
  mutable std::mutex mu_;
  std::deque<std::chrono::microseconds> samples_;  // oldest first
  DeadlineBasis basis_;
};

// Where the deadline of `basis` comes from, for people: "from the last 64 mixes: median 0.41 s, MAD
// 0.05 s, longest 1.2 s; at the floor", or "initial: 3 of 8 mixes measured". `unit` names the samples.
std::string describe_basis(const DeadlineBasis& basis, const AdaptiveDeadlineRule& rule, const std::string& unit);

}  // namespace meridian::peer
