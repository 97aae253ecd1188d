// What `meridian simulate` measured for one algorithm, and the row of the comparison table derived
// from it. Pure data and arithmetic: no I/O, so the numbers can be tested on fixed inputs.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cli/progress_log.h"
#include "cli/site_result.h"

namespace meridian::cli {

// Everything one algorithm's run produced.
struct AlgorithmOutcome {
  std::string algo;
  int sites = 0;
  double launch_time = 0;                   // Unix seconds when the sites were started; curves count from here
  double wall_seconds = 0;                  // from launch until the last site ended
  std::vector<SiteResult> results;          // one per site, in site order
  std::vector<ProgressRecord> progress;     // every site's records, in the order they were read
  std::optional<double> averaged_accuracy;  // test accuracy of the average of the final models
  // The sites were stopped once every one had reached the target (simulate --stop-at-target); their
  // results then cover the steps up to the stop.
  bool stopped_at_target = false;
};

// One point of an accuracy curve: a site's evaluation, in seconds since its algorithm's launch.
struct CurvePoint {
  double seconds = 0;
  std::string algo;
  std::string site;
  std::uint64_t step = 0;
  double accuracy = 0;
};

// The points with an accuracy, in time order (ties keep file order).
std::vector<CurvePoint> accuracy_curve(const AlgorithmOutcome& outcome);

// Seconds from launch until *every* site has reported a test accuracy >= target at least once (the
// federation as a whole is there only when its slowest site is); nullopt when some site never did.
std::optional<double> seconds_to_accuracy(const std::vector<CurvePoint>& curve, int sites, double target);

// The same, in training time: from the first step of the site that started first, less the time each
// site spent evaluating the test set (start-up — loading data, joining, forming the view — and the
// evaluations that only measure are the same work for every algorithm, and would dominate fast ones).
// nullopt also when a site's result lacks train_start.
std::optional<double> training_seconds_to_accuracy(const AlgorithmOutcome& outcome, double target);

// One row of the comparison table.
struct ComparisonRow {
  std::string algo;
  int sites = 0;
  std::optional<double> averaged_accuracy;   // the averaged final model on the test set
  std::optional<double> mean_site_accuracy;  // mean of the sites' own final test accuracies
  double seconds_per_step = 0;               // mean over sites of train_seconds / steps
  std::optional<double> seconds_to_target;   // see seconds_to_accuracy
  // see training_seconds_to_accuracy
  std::optional<double> training_seconds_to_target;
  double bytes_sent_per_site = 0;  // mean over sites
  double bytes_received_per_site = 0;
  double steps_per_site = 0;
  std::uint64_t rounds_abandoned = 0;  // summed over sites
  double wall_seconds = 0;
  bool stopped_at_target = false;  // see AlgorithmOutcome
};

ComparisonRow summarize(const AlgorithmOutcome& outcome, double target_accuracy);

}  // namespace meridian::cli
