#include "cli/simulation_csv.h"

#include <cstdio>
#include <optional>

namespace meridian::cli {
namespace {

// %.17g round-trips any double; the values here never need more than a few digits, so %.6g keeps the
// files readable while losing nothing a reader of a benchmark could use.
std::string number(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

std::string number(const std::optional<double>& v) { return v ? number(*v) : ""; }

// Byte counts are exact integers; %.6g would round them.
std::string whole(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.0f", v);
  return buf;
}

}  // namespace

std::string results_csv(const std::vector<ComparisonRow>& rows, double target_accuracy) {
  std::string out =
      "algo,sites,test_accuracy,mean_site_accuracy,seconds_per_step,target_accuracy,seconds_to_target,"
      "bytes_sent_per_site,bytes_received_per_site,steps_per_site,rounds_abandoned,wall_seconds,"
      "training_seconds_to_target,stopped_at_target\n";
  for (const auto& r : rows) {
    out += r.algo + "," + std::to_string(r.sites) + "," + number(r.averaged_accuracy) + "," +
           number(r.mean_site_accuracy) + "," + number(r.seconds_per_step) + "," + number(target_accuracy) + "," +
           number(r.seconds_to_target) + "," + whole(r.bytes_sent_per_site) + "," + whole(r.bytes_received_per_site) +
           "," + number(r.steps_per_site) + "," + std::to_string(r.rounds_abandoned) + "," + number(r.wall_seconds) +
           "," + number(r.training_seconds_to_target) + "," + (r.stopped_at_target ? "1" : "0") + "\n";
  }
  return out;
}

std::string curves_csv(const std::vector<CurvePoint>& points) {
  std::string out = "time,algo,site,step,accuracy\n";
  for (const auto& p : points) {
    out += number(p.seconds) + "," + p.algo + "," + p.site + "," + std::to_string(p.step) + "," + number(p.accuracy) +
           "\n";
  }
  return out;
}

}  // namespace meridian::cli
