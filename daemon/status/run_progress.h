// How far a run is and when it ends: rounds done of the run's total, the share done, and the time
// left at the recent pace, for `meridian status`, the status page, /metrics and the progress line.
// Rounds count from the run's first round as the federation counts them, so a site that joined a
// running federation shows the federation's round, not its own few steps.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <utility>

namespace meridian::daemon {

struct RunProgress {
  std::uint64_t done = 0;
  std::uint64_t total = 0;
  double percent = 0;                  // 0-100; 100 for a run of no rounds
  std::optional<double> eta_seconds;   // none before the pace is measured
};

// The pace of a run from the rounds done at a few moments: rounds per second over the last
// `window`. Not thread-safe: its owner guards it.
class RunPace {
 public:
  using Clock = std::chrono::steady_clock;

  explicit RunPace(Clock::duration window = std::chrono::seconds(30)) : window_(window) {}

  // `done` rounds were done at `now` (times never go back). Samples closer than a tenth of the
  // window to the previous one replace it, so a fast run keeps a few dozen at most.
  void note(std::uint64_t done, Clock::time_point now);
  // Rounds per second over the samples kept; none before two samples apart in time and rounds.
  std::optional<double> rounds_per_second() const;
  // `done` of `total` with the time left at rounds_per_second().
  RunProgress progress(std::uint64_t total) const;

 private:
  Clock::duration window_;
  std::deque<std::pair<Clock::time_point, std::uint64_t>> samples_;
};

// "2410 of 5000 rounds (48.2%), about 3 min 20 s left"; "… (48.2%)" without an ETA; "5000 of 5000
// rounds (100.0%), done" at the end.
std::string format_run_progress(const RunProgress& progress);

}  // namespace meridian::daemon
