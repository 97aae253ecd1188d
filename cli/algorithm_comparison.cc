#include "cli/algorithm_comparison.h"

#include <algorithm>
#include <map>

namespace meridian::cli {

std::vector<CurvePoint> accuracy_curve(const AlgorithmOutcome& outcome) {
  std::vector<CurvePoint> curve;
  for (const auto& r : outcome.progress) {
    if (!r.test_accuracy) continue;
    curve.push_back({r.time - outcome.launch_time, outcome.algo, r.site, r.step, *r.test_accuracy});
  }
  std::stable_sort(curve.begin(), curve.end(),
                   [](const CurvePoint& a, const CurvePoint& b) { return a.seconds < b.seconds; });
  return curve;
}

std::optional<double> seconds_to_accuracy(const std::vector<CurvePoint>& curve, int sites, double target) {
  std::map<std::string, double> first_reached;
  for (const auto& p : curve) {
    if (p.accuracy >= target && !first_reached.contains(p.site)) first_reached[p.site] = p.seconds;
  }
  if (sites <= 0 || static_cast<int>(first_reached.size()) < sites) return std::nullopt;
  double latest = 0;
  for (const auto& [site, seconds] : first_reached) latest = std::max(latest, seconds);
  return latest;
}

std::optional<double> training_seconds_to_accuracy(const AlgorithmOutcome& outcome, double target) {
  if (outcome.results.empty()) return std::nullopt;
  double first_step = outcome.results.front().train_start;
  for (const auto& r : outcome.results) {
    if (r.train_start <= 0) return std::nullopt;
    first_step = std::min(first_step, r.train_start);
  }
  // The same curve as accuracy_curve's, on the training clock.
  std::vector<CurvePoint> curve;
  for (const auto& p : outcome.progress) {
    if (!p.test_accuracy) continue;
    curve.push_back({p.time - first_step - p.eval_seconds, outcome.algo, p.site, p.step, *p.test_accuracy});
  }
  return seconds_to_accuracy(curve, outcome.sites, target);
}

ComparisonRow summarize(const AlgorithmOutcome& outcome, double target_accuracy) {
  ComparisonRow row;
  row.algo = outcome.algo;
  row.sites = outcome.sites;
  row.averaged_accuracy = outcome.averaged_accuracy;
  row.wall_seconds = outcome.wall_seconds;
  row.stopped_at_target = outcome.stopped_at_target;
  row.seconds_to_target = seconds_to_accuracy(accuracy_curve(outcome), outcome.sites, target_accuracy);
  if (outcome.results.empty()) return row;
  row.training_seconds_to_target = training_seconds_to_accuracy(outcome, target_accuracy);
  const double n = static_cast<double>(outcome.results.size());
  double accuracy_sum = 0, seconds_per_step_sum = 0;
  int with_accuracy = 0;
  // Integer totals are summed exactly and divided once: adding r.steps / n per site turned 39 steps at
  // each of 3 sites into 38.99999999999999.
  std::uint64_t bytes_sent = 0, bytes_received = 0, steps = 0;
  for (const auto& r : outcome.results) {
    seconds_per_step_sum += r.seconds_per_step;
    bytes_sent += r.bytes_sent;
    bytes_received += r.bytes_received;
    steps += r.steps;
    row.rounds_abandoned += r.rounds_abandoned;
    if (r.test_accuracy) {
      accuracy_sum += *r.test_accuracy;
      ++with_accuracy;
    }
  }
  row.seconds_per_step = seconds_per_step_sum / n;
  row.bytes_sent_per_site = static_cast<double>(bytes_sent) / n;
  row.bytes_received_per_site = static_cast<double>(bytes_received) / n;
  row.steps_per_site = static_cast<double>(steps) / n;
  if (with_accuracy > 0) row.mean_site_accuracy = accuracy_sum / with_accuracy;
  return row;
}

}  // namespace meridian::cli
