#include "daemon/algorithms/auto_shape.h"

#include <algorithm>
#include <cstdio>

namespace meridian::daemon::algorithms {

std::uint64_t exchange_crossings(std::size_t sites, bool direct) {
  if (sites < 2) return 0;
  return direct ? 1 : 2 * (static_cast<std::uint64_t>(sites) - 1);
}

std::uint64_t steps_to_cover(const peer::Pace& pace, std::uint64_t crossings) {
  if (!pace.measured()) return 0;
  // Twice the crossings' time, crossings · rtt / 2 each: crossings · rtt, in whole steps rounded up. The
  // figures are bounded (peer::kMaxPaceMicros < 2^32) and crossings by the members a view may hold,
  // so the product fits.
  return (crossings * pace.rtt_us + pace.step_us - 1) / pace.step_us;
}

DtsShape choose_dts_shape(const peer::Pace& pace, std::uint64_t crossings, DtsShape fallback) {
  if (!pace.measured()) return fallback;
  const auto d = static_cast<std::uint32_t>(
      std::clamp<std::uint64_t>(steps_to_cover(pace, crossings), kAutoDtsMinDelay, kAutoDtsMaxDelay));
  return {d, 8 * d};
}

std::uint32_t choose_sgp_tau(const peer::Pace& pace, std::uint32_t fallback) {
  if (!pace.measured()) return fallback;
  return static_cast<std::uint32_t>(std::min<std::uint64_t>(steps_to_cover(pace, 1) + 1, kAutoSgpMaxTau));
}

std::uint32_t choose_diloco_overlap(const peer::Pace& pace, std::uint64_t crossings, std::uint32_t inner_steps,
                                    std::uint32_t fallback) {
  if (!pace.measured()) return std::min(fallback, inner_steps);
  // 1.5 times the crossings' time, crossings · rtt / 2 each: ⌈3 · crossings · rtt / (4 · step)⌉ steps
  // (the same bounds on the figures keep the product within 64 bits).
  const std::uint64_t need = (3 * crossings * pace.rtt_us + 4 * pace.step_us - 1) / (4 * pace.step_us);
  return static_cast<std::uint32_t>(std::clamp<std::uint64_t>(need, 1, std::max<std::uint32_t>(inner_steps, 1)));
}

std::string describe_pace(const peer::Pace& pace) {
  if (!pace.measured()) return "not measured yet: the default shape";
  char buf[96];
  std::snprintf(buf, sizeof buf, "round trip %.1f ms, step %.1f ms", static_cast<double>(pace.rtt_us) / 1000.0,
                static_cast<double>(pace.step_us) / 1000.0);
  return buf;
}

}  // namespace meridian::daemon::algorithms
