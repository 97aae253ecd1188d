#include "daemon/status/run_trail.h"

#include <chrono>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <system_error>

#include "daemon/files/safe_file.h"
#include "error/error.h"

namespace meridian::daemon {
namespace {

// Readers may poll these files while the daemon runs, so replace them whole rather than rewrite in
// place; under a random temporary name, so that a link planted at a fixed one cannot redirect the write.
void write_atomically(const std::filesystem::path& path, const std::string& text) { replace_file(path, text, 0644); }

nlohmann::json optional_number(const std::optional<double>& v) { return v ? nlohmann::json(*v) : nlohmann::json(); }

}  // namespace

double unix_seconds_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

void RunTrail::append_progress(const ProgressRecord& r) const {
  const nlohmann::json line = {{"time", r.time},
                               {"site", r.site},
                               {"step", r.step},
                               {"epoch", r.epoch},
                               {"train_loss", r.train_loss},
                               {"test_accuracy", optional_number(r.test_accuracy)},
                               {"bytes_sent", r.bytes_sent},
                               {"bytes_received", r.bytes_received},
                               {"eval_seconds", r.eval_seconds}};
  // A diverged loss is NaN, which JSON cannot hold; dump() writes null for it.
  append_to_file(progress_file(), line.dump() + "\n", 0644);
}

void RunTrail::write_result(const RunResult& r) const {
  nlohmann::json doc = {{"site", r.site},
                              {"algo", r.algo},
                              {"steps", r.steps},
                              {"epochs", r.epochs},
                              {"train_seconds", r.train_seconds},
                              {"seconds_per_step", r.seconds_per_step},
                              {"test_accuracy", optional_number(r.test_accuracy)},
                              {"push_sum_weight", r.push_sum_weight},
                              {"bytes_sent", r.bytes_sent},
                              {"bytes_received", r.bytes_received},
                              {"rounds_abandoned", r.rounds_abandoned},
                              {"final_checkpoint", r.final_checkpoint},
                              {"finish_seconds", r.finish_seconds},
                              {"train_start", r.train_start},
                              {"loop_wait_seconds", r.loop_wait_seconds},
                              {"loop_trainer_cpu_seconds", r.loop_trainer_cpu_seconds},
                              {"loop_process_cpu_seconds", r.loop_process_cpu_seconds},
                              {"loop_minor_faults", r.loop_minor_faults},
                              {"completed", r.completed}};
  if (r.dp_epsilon) {
    doc["dp_epsilon"] = *r.dp_epsilon;
    doc["dp_delta"] = r.dp_delta.value_or(0.0);
  }
  write_atomically(result_file(), doc.dump(2) + "\n");
}

void RunTrail::write_endpoint(const std::string& endpoint) const { write_atomically(endpoint_file(), endpoint + "\n"); }

}  // namespace meridian::daemon
