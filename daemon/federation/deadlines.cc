#include "daemon/federation/deadlines.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace meridian::daemon {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;
using std::chrono::seconds;

std::string seconds_text(microseconds us) {
  const double s = static_cast<double>(us.count()) / 1e6;
  if (s >= 3600 && std::fmod(s, 3600) == 0) return std::to_string(static_cast<long long>(s / 3600)) + " h";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g s", s);
  return buf;
}

}  // namespace

peer::AdaptiveDeadlineRule round_deadline_rule() {
  peer::AdaptiveDeadlineRule r;
  r.floor = seconds(10);
  r.cap = seconds(3600);
  r.initial = seconds(30);
  r.factor = 3;
  r.k = 8;
  r.tail = 2;
  r.window = 64;
  r.min_samples = 8;
  return r;
}

peer::AdaptiveDeadlineRule heartbeat_deadline_rule(const SiteConfig& config) {
  peer::AdaptiveDeadlineRule r;
  r.floor = 6 * heartbeat_milliseconds(config.heartbeat_interval);
  r.cap = std::max<microseconds>(seconds(60), r.floor);
  r.initial = r.floor;
  r.factor = 2;
  r.k = 8;
  r.tail = 2;
  r.window = 256;
  r.min_samples = 16;
  return r;
}

milliseconds round_timeout_bound(const SiteConfig& config) {
  if (config.round_timeout == kAutoDeadline)
    return std::chrono::duration_cast<milliseconds>(round_deadline_rule().initial);
  return milliseconds(static_cast<long long>(config.round_timeout * 1000.0));
}

milliseconds view_wait_bound(const SiteConfig& config) {
  const milliseconds shortest = config.round_timeout == kAutoDeadline
                                    ? std::chrono::duration_cast<milliseconds>(round_deadline_rule().floor)
                                    : round_timeout_bound(config);
  return shortest / 2;
}

milliseconds hearsay_view_interval(const SiteConfig& config) { return 10 * view_wait_bound(config); }

milliseconds heartbeat_timeout_bound(const SiteConfig& config) {
  if (config.heartbeat_timeout == kAutoDeadline)
    return std::chrono::duration_cast<milliseconds>(heartbeat_deadline_rule(config).initial);
  return heartbeat_milliseconds(config.heartbeat_timeout);
}

std::string describe_deadlines(const SiteConfig& config) {
  std::string out = "round timeout ";
  if (config.round_timeout == kAutoDeadline) {
    const auto r = round_deadline_rule();
    out += "auto (" + seconds_text(r.initial) + " until " + std::to_string(r.min_samples) +
           " mixes are measured, then " + seconds_text(r.floor) + " to " + seconds_text(r.cap) + ")";
  } else {
    out += seconds_text(round_timeout_bound(config));
  }
  out += ", heartbeat timeout ";
  if (config.heartbeat_timeout == kAutoDeadline) {
    const auto r = heartbeat_deadline_rule(config);
    out += "auto (" + seconds_text(r.initial) + " until " + std::to_string(r.min_samples) +
           " heartbeat gaps are measured, then " + seconds_text(r.floor) + " to " + seconds_text(r.cap) + ")";
  } else {
    out += seconds_text(heartbeat_timeout_bound(config));
  }
  return out;
}

}  // namespace meridian::daemon
