#include "peer/pace.h"

namespace meridian::peer {

bool pace_moved(const Pace& agreed, const Pace& measured) {
  if (!measured.measured()) return false;
  if (!agreed.measured()) return true;
  // Only the proposer decides this (the view then carries the figures to everyone), so floating point
  // is fine here; the shapes themselves are chosen in integers.
  const double a = static_cast<double>(agreed.rtt_us) / static_cast<double>(agreed.step_us);
  const double m = static_cast<double>(measured.rtt_us) / static_cast<double>(measured.step_us);
  if (a <= 0.25 && m <= 0.25) return false;
  return 3 * m > 4 * a || 2 * m < a;
}

}  // namespace meridian::peer
