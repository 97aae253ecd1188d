// `meridian status`: where a running daemon is in its training, and how it is doing.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "cli/control_target.h"
#include "daemon/control_client.h"
#include "daemon/human_format.h"

namespace meridian::cli {
namespace {

// Before the first progress report of a run nothing is measured yet; zeros would read as a result.
constexpr const char* kNotMeasured = "not measured yet";

void print_status(const daemon::StatusReport& s) {
  char loss[32];
  std::snprintf(loss, sizeof loss, "%.4g", s.train_loss.value_or(0));
  char accuracy[32] = "-";
  if (s.test_accuracy) std::snprintf(accuracy, sizeof accuracy, "%.1f%%", *s.test_accuracy * 100);
  std::string throughput = kNotMeasured;
  if (s.samples_per_second && s.bytes_per_second) {
    char samples[48];
    std::snprintf(samples, sizeof samples, "%.0f samples/s, ", *s.samples_per_second);
    throughput = samples + daemon::format_rate(*s.bytes_per_second);
  }
  char weight[32];
  std::snprintf(weight, sizeof weight, "%.6g", s.push_sum_weight);
  std::cout << "site        " << s.site << " (" << s.algorithm << "), " << s.state << "\n"
            << "listen      " << s.listen << "\n"
            << "step        " << s.step << "  (epoch " << s.epoch << ")\n"
            << "loss        " << (s.train_loss ? loss : kNotMeasured) << "\n"
            << "accuracy    " << accuracy << "\n"
            << "peers       " << s.peers_alive << " alive of " << s.peers_known << " known (view " << s.view_id << ")\n"
            << "staleness   " << s.staleness << (s.staleness == 1 ? " step" : " steps") << "\n"
            << "throughput  " << throughput << "\n"
            << "push-sum w  " << weight << "\n"
            << "checkpoint  "
            << (s.last_checkpoint.empty()
                    ? std::string("none yet")
                    : s.last_checkpoint + " (" + daemon::format_duration(s.checkpoint_age_seconds.value_or(NAN)) +
                          " ago)")
            << "\n"
            << "uptime      " << daemon::format_duration(s.uptime_seconds) << "\n";
}

}  // namespace

void add_status_command(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("status", "Show a running daemon's progress: step, loss, accuracy, peers");
  cmd->footer(
      "Examples:\n"
      "  meridian status                      # the site started in this directory\n"
      "  meridian status --config oregon.toml --json\n");
  auto target = std::make_shared<ControlTarget>();
  add_control_target_options(*cmd, *target);
  cmd->callback([target, &exit_code] {
    daemon::ControlClient client(target->socket_path(),
                                 std::chrono::milliseconds(std::llround(target->timeout_seconds * 1000)));
    const auto status = client.status();
    if (target->json) {
      std::cout << daemon::to_json_text(status) << "\n";
    } else {
      print_status(status);
    }
    exit_code = 0;
  });
}

}  // namespace meridian::cli
