// The two CSV files `meridian simulate` writes next to its logs (RFC 4180, header line first, "."
// decimal point, missing values as empty fields; no field needs quoting: algorithm and site names
// are letters, digits, '.', '_' and '-').
#pragma once

#include <string>
#include <vector>

#include "cli/algorithm_comparison.h"

namespace meridian::cli {

// results.csv, one row per algorithm:
// algo,sites,test_accuracy,mean_site_accuracy,seconds_per_step,target_accuracy,seconds_to_target,
// bytes_sent_per_site,bytes_received_per_site,steps_per_site,rounds_abandoned,wall_seconds,
// training_seconds_to_target
std::string results_csv(const std::vector<ComparisonRow>& rows, double target_accuracy);

// curves.csv, one row per evaluation of a site: time,algo,site,step,accuracy
// (time in seconds since the algorithm's sites were started, accuracy a fraction in [0, 1]).
std::string curves_csv(const std::vector<CurvePoint>& points);

}  // namespace meridian::cli
