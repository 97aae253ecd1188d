#include "daemon/status/progress_line.h"

#include <cmath>
#include <cstdio>

#include "daemon/status/human_format.h"

namespace meridian::daemon {

std::string format_progress_line(const Progress& p) {
  // Appended piece by piece: GCC 12 warns falsely (-Wrestrict) about "/" + std::to_string(...).
  std::string line = "step ";
  line += std::to_string(p.step);
  char buf[64];
  if (p.total_steps) {
    line += '/';
    line += std::to_string(*p.total_steps);
    const double share = *p.total_steps == 0 ? 100.0 : 100.0 * static_cast<double>(p.step) / *p.total_steps;
    std::snprintf(buf, sizeof buf, " (%.1f%%)", share);
    line += buf;
  }
  line += "  epoch ";
  line += std::to_string(p.epoch);
  if (p.total_epochs) {
    line += '/';
    line += std::to_string(*p.total_epochs);
  }

  if (std::isnan(p.loss)) {
    line += "  loss nan";
  } else {
    std::snprintf(buf, sizeof buf, "  loss %.4g", p.loss);
    line += buf;
  }
  if (p.accuracy) {
    std::snprintf(buf, sizeof buf, "  acc %.1f%%", *p.accuracy * 100);
    line += buf;
  } else {
    line += "  acc -";
  }
  line += "  peers " + std::to_string(p.peers_alive) + "/" + std::to_string(p.peers_known);
  line += "  stale " + std::to_string(p.staleness);
  line += "  " + format_rate(p.bytes_per_second);
  const bool done = p.total_steps && p.step >= *p.total_steps;
  if (p.eta_seconds && !done) line += "  eta " + format_duration(*p.eta_seconds);
  return line;
}

}  // namespace meridian::daemon
