// One algorithm's turn in `meridian simulate`: start a real `meridian start` process per site on
// 127.0.0.1, follow their progress.jsonl files while showing one live line, wait for all of them with
// a deadline, and collect what they wrote. The sites are stopped (SIGTERM, then SIGKILL after a grace
// period or at a second Ctrl-C) when the user interrupts, when the deadline passes, or as soon as one
// site fails; the failing site's log tail goes into the error.
#pragma once

#include <filesystem>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "cli/algorithm_comparison.h"
#include "cli/interrupt_flag.h"
#include "cli/simulation_layout.h"
#include "cli/status_line.h"
#include "daemon/site_config.h"
#include "error/error.h"

namespace meridian::cli {

// Test accuracy (fraction in [0, 1]) of the model obtained by averaging the given final checkpoints
// (push-sum de-biased), on the test set of `config`'s dataset. May throw std::exception; simulate then
// reports the accuracy as missing and says why.
using AveragedModelEvaluator =
    std::function<double(const std::vector<std::filesystem::path>& checkpoints, const daemon::SiteConfig& config)>;

// A site failed, the deadline passed, or a file the sites wrote was malformed. what() says which site
// and why, and ends with the site's log tail when there is one.
class SimulationFailed : public error::PeerError {
 public:
  using error::PeerError::PeerError;
};

// The user interrupted (Ctrl-C or SIGTERM); every site has been stopped.
class SimulationInterrupted : public error::UserError {
 public:
  using error::UserError::UserError;
};

struct AlgorithmRunSettings {
  std::filesystem::path program;  // the meridian binary
  double timeout_seconds = 1800;
  double grace_seconds = 15;  // between SIGTERM and SIGKILL when stopping sites
  std::size_t log_tail_lines = 25;
  // When set, the sites are stopped gracefully (SIGTERM) as soon as every one has reported this test
  // accuracy; each still writes its result (with completed false) and final checkpoint.
  std::optional<double> stop_at_accuracy;
};

// Runs `sites` (from plan_algorithm_sites; their directories are prepared here) to the end, or to
// settings.stop_at_accuracy.
// Throws SimulationFailed or SimulationInterrupted as above; never leaves a site running.
AlgorithmOutcome run_algorithm(const std::string& algo, const std::vector<SiteLaunch>& sites,
                               const AlgorithmRunSettings& settings, const AveragedModelEvaluator& evaluate,
                               const InterruptFlag& interrupt, StatusLine& status);

}  // namespace meridian::cli
