// The plot `meridian simulate` writes: test accuracy against wall time, one colour per algorithm, one
// line per site (sites of one algorithm share its colour), a dashed line at the target accuracy and a
// diamond at the end of each algorithm's run for the accuracy of its averaged final model.
// Plain SVG 1.1 text written here (no plotting dependency); any browser shows it.
#pragma once

#include <string>
#include <vector>

#include "cli/algorithm_comparison.h"
#include "daemon/site_config.h"

namespace meridian::cli {

struct AccuracyPlotLabels {
  std::string title = "Test accuracy against wall time";
  std::string subtitle;        // e.g. "4 sites, WAN world4, mlp, iid"
  double target_accuracy = 0;  // 0: no target line
};

// What a run trained on what, for the subtitle: "mlp on fashion-mnist", "mlp on train.csv" (the file
// --train or --train-csv names), "model.txt on ohio.csv, utah.csv" (a model file; one training file
// per site as `site_train` lists them).
std::string model_and_data(const daemon::SiteConfig& site, const std::vector<std::string>& site_train = {});

// `rows` give the algorithms in legend order and the diamonds (wall_seconds, averaged_accuracy);
// `points` are the curves (accuracy_curve of every algorithm). With no points at all the plot still
// has its axes and says "no evaluations". Returns the whole SVG document.
std::string render_accuracy_svg(const std::vector<CurvePoint>& points, const std::vector<ComparisonRow>& rows,
                                const AccuracyPlotLabels& labels);

}  // namespace meridian::cli
