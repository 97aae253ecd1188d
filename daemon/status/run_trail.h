// The machine-readable trail a daemon leaves in its run directory, for `meridian simulate` and other
// tools (a contract: keep the field names and types):
//   RUN_DIR/progress.jsonl  one JSON object per line, appended at each evaluation and at the end:
//     {"time": unix seconds (float), "site": name, "step": int, "epoch": float, "train_loss": float,
//      "test_accuracy": float or null, "bytes_sent": int, "bytes_received": int,
//      "eval_seconds": float, the site's time spent evaluating so far}
//   RUN_DIR/result.json     written (atomically) at a normal end, before the daemon exits 0:
//     {"site", "algo", "steps", "epochs", "train_seconds", "seconds_per_step", "test_accuracy",
//      "bytes_sent", "bytes_received", "rounds_abandoned", "final_checkpoint": path,
//      "finish_seconds": the part of train_seconds spent after the last step waiting for the mixes
//      still in flight (dts, sgp with overlap); train_seconds − finish_seconds is the steady loop;
//      "train_start": Unix seconds when the first step began, after start-up and joining}
//   RUN_DIR/endpoint        the address peers join through (one line), written once listening.
// "step" counts this run's steps from 0 (rounds since the run's first round); "epoch" is step divided
// by the steps of one epoch (site_data.h).
//
// Thread-safety: none; the trainer thread writes the trail.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

namespace meridian::daemon {

struct ProgressRecord {
  double time = 0;  // unix seconds
  std::string site;
  std::uint64_t step = 0;
  double epoch = 0;
  double train_loss = 0;
  std::optional<double> test_accuracy;
  std::uint64_t bytes_sent = 0;
  std::uint64_t bytes_received = 0;
  double eval_seconds = 0;  // spent evaluating the test set so far, this record's evaluation included
};

struct RunResult {
  std::string site;
  std::string algo;
  std::uint64_t steps = 0;
  double epochs = 0;
  double train_seconds = 0;
  double seconds_per_step = 0;
  double finish_seconds = 0;  // of train_seconds: waiting after the last step for mixes in flight
  double train_start = 0;     // Unix seconds when the first step began (0: not recorded)
  // The step loop (train_seconds without finish_seconds): the trainer's time in the mix channel (waiting
  // for averages, or for room in its queue), the trainer thread's CPU time, the whole process's CPU
  // time (every thread) and its minor page faults. CPU figures do not depend on how loaded the
  // machine is; the rest of the loop's wall time is time spent runnable but descheduled.
  double loop_wait_seconds = 0;
  double loop_trainer_cpu_seconds = 0;
  double loop_process_cpu_seconds = 0;
  std::uint64_t loop_minor_faults = 0;
  std::optional<double> test_accuracy;
  // DP-SGD: the (ε, δ) spent by the run's steps; none without DP.
  std::optional<double> dp_epsilon;
  std::optional<double> dp_delta;
  std::uint64_t bytes_sent = 0;
  std::uint64_t bytes_received = 0;
  std::uint64_t rounds_abandoned = 0;
  // sgp: the push-sum weight w after the last step (1 for the other algorithms). Below 1 in a
  // fault-free overlap run by the mass of the shares still in flight (docs/algorithms.md).
  double push_sum_weight = 1.0;
  std::string final_checkpoint;
  // false when the site was stopped (SIGTERM, SIGINT) before its last step: the figures above then
  // cover the steps it did.
  bool completed = true;
};

class RunTrail {
 public:
  explicit RunTrail(std::filesystem::path run_dir) : dir_(std::move(run_dir)) {}

  // Appends one line to progress.jsonl. Throws error::UserError naming the file on failure, or when it
  // is a symbolic link (never followed).
  void append_progress(const ProgressRecord& record) const;
  // Writes result.json atomically (a temporary file under a random name, then rename; a link at the
  // name is replaced, not followed). Throws error::UserError naming the file.
  void write_result(const RunResult& result) const;
  // Writes the endpoint file atomically. Throws error::UserError naming the file.
  void write_endpoint(const std::string& endpoint) const;

  std::filesystem::path progress_file() const { return dir_ / "progress.jsonl"; }
  std::filesystem::path result_file() const { return dir_ / "result.json"; }
  std::filesystem::path endpoint_file() const { return dir_ / "endpoint"; }

 private:
  std::filesystem::path dir_;
};

// Seconds since the Unix epoch, with sub-second precision.
double unix_seconds_now();

}  // namespace meridian::daemon
