// RUN_DIR/progress.jsonl, the file every `meridian start` appends to at each evaluation and at the end:
// one JSON object per line,
//   {"time": 1763771234.5, "site": "site-0", "step": 200, "epoch": 0.85, "train_loss": 0.61,
//    "test_accuracy": 0.78, "bytes_sent": 1234, "bytes_received": 5678, "eval_seconds": 1.9}
// ("time" is Unix seconds; "test_accuracy" is a fraction in [0, 1], or null when not evaluated;
// "eval_seconds" the site's time spent evaluating so far, optional).
// `meridian simulate` follows these files while the sites train.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "daemon/status/run_trail.h"
#include "error/error.h"

namespace meridian::cli {

// The record the daemon writes (daemon/status/run_trail.h): one type for the writer and this reader.
using ProgressRecord = daemon::ProgressRecord;

// A line or file that does not follow the format; what() names the source and the problem.
class ProgressLogError : public error::PeerError {
 public:
  using error::PeerError::PeerError;
};

// Parses one line. `source` (e.g. "DIR/progress.jsonl line 3") prefixes errors.
// Throws ProgressLogError for malformed JSON, a missing or mistyped field, or an accuracy outside [0, 1].
ProgressRecord parse_progress_record(std::string_view line, const std::string& source);

// Reads the records appended to one progress.jsonl since the last call. A last line without its
// newline is left for the next call (the daemon may be writing it). A file that does not exist yet
// reads as empty. Not thread-safe.
class ProgressLogFollower {
 public:
  explicit ProgressLogFollower(std::filesystem::path file) : file_(std::move(file)) {}
  // The new complete records, in file order. Throws ProgressLogError naming the file and line.
  std::vector<ProgressRecord> read_new();
  const std::filesystem::path& file() const { return file_; }

 private:
  std::filesystem::path file_;
  std::uint64_t offset_ = 0;
  std::uint64_t lines_read_ = 0;
};

}  // namespace meridian::cli
