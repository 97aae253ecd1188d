#include "daemon/status/run_progress.h"

#include <algorithm>
#include <cstdio>

#include "daemon/status/human_format.h"

namespace meridian::daemon {

void RunPace::note(std::uint64_t done, Clock::time_point now) {
  if (samples_.size() >= 2 && now - samples_[samples_.size() - 2].first < window_ / 10) samples_.pop_back();
  samples_.emplace_back(now, done);
  // Keep one sample at or beyond the window's start, so the rate always spans the whole window.
  while (samples_.size() > 2 && now - samples_[1].first >= window_) samples_.pop_front();
}

std::optional<double> RunPace::rounds_per_second() const {
  if (samples_.size() < 2) return std::nullopt;
  const auto& [t0, d0] = samples_.front();
  const auto& [t1, d1] = samples_.back();
  const double seconds = std::chrono::duration<double>(t1 - t0).count();
  if (seconds <= 0 || d1 <= d0) return std::nullopt;
  return static_cast<double>(d1 - d0) / seconds;
}

RunProgress RunPace::progress(std::uint64_t total) const {
  RunProgress p;
  p.total = total;
  p.done = samples_.empty() ? 0 : std::min(samples_.back().second, total);
  p.percent = total == 0 ? 100.0 : 100.0 * static_cast<double>(p.done) / static_cast<double>(total);
  if (p.done >= total) {
    p.eta_seconds = 0;
  } else if (const auto rate = rounds_per_second()) {
    p.eta_seconds = static_cast<double>(total - p.done) / *rate;
  }
  return p;
}

std::string format_run_progress(const RunProgress& p) {
  char share[32];
  std::snprintf(share, sizeof share, " (%.1f%%)", p.percent);
  std::string out = std::to_string(p.done) + " of " + format_count(p.total, "round") + share;
  if (p.done >= p.total) out += ", done";
  else if (p.eta_seconds) out += ", about " + format_duration(*p.eta_seconds) + " left";
  return out;
}

}  // namespace meridian::daemon
