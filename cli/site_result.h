// RUN_DIR/result.json, written by `meridian start` when a site finishes training, or is stopped
// gracefully after it began ("completed": false):
//   {"site": "site-0", "algo": "sgp", "steps": 702, "epochs": 3, "train_seconds": 81.2,
//    "seconds_per_step": 0.116, "test_accuracy": 0.861, "bytes_sent": 1.2e8, "bytes_received": 1.2e8,
//    "rounds_abandoned": 0, "final_checkpoint": "RUN_DIR/checkpoints/checkpoint-...mrdn", "completed": true}
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>

#include "daemon/status/run_trail.h"
#include "error/error.h"

namespace meridian::cli {

// The result the daemon writes (daemon/status/run_trail.h): one type for the writer and this reader.
using SiteResult = daemon::RunResult;

class SiteResultError : public error::PeerError {
 public:
  using error::PeerError::PeerError;
};

// Reads and checks one result.json. Throws SiteResultError naming the file and the problem (missing,
// not JSON, a missing or mistyped field).
SiteResult read_site_result(const std::filesystem::path& file);

}  // namespace meridian::cli
