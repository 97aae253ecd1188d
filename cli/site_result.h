// RUN_DIR/result.json, written by `meridian start` when a site finishes training normally:
//   {"site": "site-0", "algo": "sgp", "steps": 702, "epochs": 3, "train_seconds": 81.2,
//    "seconds_per_step": 0.116, "test_accuracy": 0.861, "bytes_sent": 1.2e8, "bytes_received": 1.2e8,
//    "rounds_abandoned": 0, "final_checkpoint": "RUN_DIR/checkpoints/checkpoint-...mrdn"}
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>

namespace meridian::cli {

struct SiteResult {
  std::string site;
  std::string algo;
  std::uint64_t steps = 0;
  double epochs = 0;
  double train_seconds = 0;
  double seconds_per_step = 0;
  std::optional<double> test_accuracy;  // this site's own model, fraction in [0, 1]
  std::uint64_t bytes_sent = 0;
  std::uint64_t bytes_received = 0;
  std::uint64_t rounds_abandoned = 0;
  std::filesystem::path final_checkpoint;  // as the site wrote it (relative to the site's working directory)
};

class SiteResultError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Reads and checks one result.json. Throws SiteResultError naming the file and the problem (missing,
// not JSON, a missing or mistyped field).
SiteResult read_site_result(const std::filesystem::path& file);

}  // namespace meridian::cli
