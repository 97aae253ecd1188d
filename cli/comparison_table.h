// The comparison `meridian simulate` prints at the end: a text table for people and the same numbers
// as one JSON object for scripts (--json).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "cli/algorithm_comparison.h"

namespace meridian::cli {

// The run's settings and outputs that go with the rows.
struct ComparisonContext {
  int sites = 0;
  std::string wan;        // "" = no emulation
  std::string partition;  // iid | dirichlet:ALPHA
  std::string model;
  double epochs = 0;
  double target_accuracy = 0;
  std::filesystem::path results_csv, curves_csv, plot_svg;  // empty when not written
};

// A table with one line per row, aligned, e.g.
//   algorithm  accuracy  site acc.  per step  to 80.0%  sent/site  wall time
//   allreduce     84.1%      84.1%    1.21 s  3 min 2 s     352 MB  5 min 2 s
// A missing value shows as "—". Ends with a newline.
std::string format_comparison_table(const std::vector<ComparisonRow>& rows, double target_accuracy);

// {"sites":..,"wan":..,"partition":..,"model":..,"epochs":..,"target_accuracy":..,
//  "results":[{"algo":..,"test_accuracy":..|null,"mean_site_accuracy":..|null,"seconds_per_step":..,
//              "seconds_to_target":..|null,"training_seconds_to_target":..|null,"bytes_sent_per_site":..,"bytes_received_per_site":..,
//              "steps_per_site":..,"rounds_abandoned":..,"wall_seconds":..}, ...],
//  "files":{"results_csv":..,"curves_csv":..,"plot_svg":..}}  (pretty-printed, 2 spaces)
std::string comparison_json(const std::vector<ComparisonRow>& rows, const ComparisonContext& context);

// "1.21 s" at one second and above, "52 ms" / "4.5 ms" below (per-step times need more resolution than
// format_duration's whole seconds).
std::string format_step_time(double seconds);

}  // namespace meridian::cli
