// The one line `meridian start` prints (and rewrites) while training: where the site is, how well it
// learns, and how its network is doing.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace meridian::daemon {

struct Progress {
  std::uint64_t step = 0;
  std::optional<std::uint64_t> total_steps;  // shown as step/total (percent) when known
  std::optional<double> eta_seconds;         // time left, shown once measured and until the last step
  std::uint64_t epoch = 0;                   // epochs completed
  std::optional<std::uint64_t> total_epochs;
  double loss = 0;                 // recent training loss; NaN shows as "nan" (diverged)
  std::optional<double> accuracy;  // last test accuracy in [0, 1]; "-" before the first
  int peers_alive = 0;             // including this site
  int peers_known = 0;             // including this site
  std::uint64_t staleness = 0;     // steps ahead of the oldest expected message
  double bytes_per_second = 0;     // sent + received
};

// e.g. "step 1200/5000 (24.0%)  epoch 3/5  loss 0.4123  acc 86.2%  peers 3/4  stale 1  2.4 MB/s  eta 3 min 10 s"
std::string format_progress_line(const Progress& progress);

}  // namespace meridian::daemon
