#include "peer/adaptive_deadline.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "error/error.h"

namespace meridian::peer {
namespace {

using std::chrono::microseconds;

// The median of `v` (sorted in place); the mean of the middle two for an even count.
microseconds median_of(std::vector<microseconds>& v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

std::string seconds_text(microseconds us) {
  char buf[32];
  const double s = static_cast<double>(us.count()) / 1e6;
  std::snprintf(buf, sizeof buf, s < 10 ? "%.3g" : "%.0f", s);
  return std::string(buf) + " s";
}

}  // namespace

AdaptiveDeadline::AdaptiveDeadline(AdaptiveDeadlineRule rule) : rule_(rule) {
  error::enforce(rule_.floor.count() > 0 && rule_.floor <= rule_.cap && rule_.initial >= rule_.floor &&
                     rule_.initial <= rule_.cap && rule_.factor >= 1 && rule_.k >= 0 && rule_.tail >= 0 &&
                     rule_.window >= 1 && rule_.min_samples >= 1 && rule_.min_samples <= rule_.window,
                 "an adaptive deadline's rule is out of bounds");
  basis_.deadline = rule_.initial;
}

void AdaptiveDeadline::observe(microseconds sample) {
  sample = std::max(sample, microseconds(0));
  std::lock_guard lock(mu_);
  samples_.push_back(sample);
  if (samples_.size() > rule_.window) samples_.pop_front();
  basis_.samples = samples_.size();
  if (samples_.size() < rule_.min_samples) return;
  std::vector<microseconds> v(samples_.begin(), samples_.end());
  const microseconds median = median_of(v);
  basis_.largest = v.back();
  for (auto& x : v) x = x > median ? x - median : median - x;
  const microseconds mad = median_of(v);
  // In double: the products of an hour-long sample and the factors stay far from overflow.
  const double spread = rule_.factor * static_cast<double>(median.count()) + rule_.k * static_cast<double>(mad.count());
  const double deadline = std::max(spread, rule_.tail * static_cast<double>(basis_.largest.count()));
  const double bounded = std::clamp(deadline, static_cast<double>(rule_.floor.count()), static_cast<double>(rule_.cap.count()));
  basis_.median = median;
  basis_.mad = mad;
  basis_.deadline = microseconds(static_cast<long long>(std::llround(bounded)));
}

microseconds AdaptiveDeadline::deadline() const {
  std::lock_guard lock(mu_);
  return basis_.deadline;
}

DeadlineBasis AdaptiveDeadline::basis() const {
  std::lock_guard lock(mu_);
  return basis_;
}

std::string describe_basis(const DeadlineBasis& basis, const AdaptiveDeadlineRule& rule, const std::string& unit) {
  if (basis.samples < rule.min_samples)
    return "initial: " + std::to_string(basis.samples) + " of " + std::to_string(rule.min_samples) + " " + unit +
           " measured";
  std::string why = "from the last " + std::to_string(basis.samples) + " " + unit + ": median " +
                    seconds_text(basis.median) + ", MAD " + seconds_text(basis.mad) + ", longest " +
                    seconds_text(basis.largest);
  if (basis.deadline == rule.floor) why += "; at the floor";
  else if (basis.deadline == rule.cap) why += "; at the cap";
  return why;
}

}  // namespace meridian::peer
