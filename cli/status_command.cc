// `meridian status`: where a running daemon is in its training, and how it is doing; with
// --federation, every site of the federation as that daemon last heard of it.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "cli/control_target.h"
#include "daemon/control/control_client.h"
#include "daemon/status/human_format.h"
#include "daemon/status/run_progress.h"

namespace meridian::cli {
namespace {

// Before the first progress report of a run nothing is measured yet; zeros would read as a result.
constexpr const char* kNotMeasured = "not measured yet";

// "D = 3, P = 24 since round 40, chosen from round trip 120.0 ms, step 40.0 ms".
std::string shape_line(const daemon::StatusReport& s) {
  std::string out = s.shape;
  if (s.shape_since_round) out += " since round " + std::to_string(*s.shape_since_round);
  if (s.shape_round_trip_seconds && s.shape_step_seconds) {
    char figures[96];
    std::snprintf(figures, sizeof figures, ", chosen from round trip %.1f ms, step %.1f ms",
                  *s.shape_round_trip_seconds * 1000, *s.shape_step_seconds * 1000);
    out += figures;
  } else {
    out += " (automatic; the network is not measured yet: the default shape)";
  }
  return out;
}

// "2410 of 5000 rounds (48.2%), about 3 min 20 s left  (epoch 3)"; "0  (epoch 0)" before the run's
// rounds are agreed.
std::string step_line(const daemon::StatusReport& s) {
  std::string out = std::to_string(s.step);
  if (s.total_steps) {
    daemon::RunProgress p;
    p.done = s.step;
    p.total = *s.total_steps;
    p.percent = s.percent_done.value_or(0);
    p.eta_seconds = s.eta_seconds;
    out = daemon::format_run_progress(p);
  }
  return out + "  (epoch " + std::to_string(s.epoch) + ")";
}

// "epsilon 1.2 of 3 spent (DP-SGD)".
std::string privacy_line(const daemon::StatusReport& s) {
  char text[96];
  if (s.dp_epsilon_budget)
    std::snprintf(text, sizeof text, "epsilon %.3g of %.3g spent (DP-SGD)", *s.dp_epsilon_spent, *s.dp_epsilon_budget);
  else
    std::snprintf(text, sizeof text, "epsilon %.3g spent (DP-SGD)", *s.dp_epsilon_spent);
  return text;
}

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
            << "step        " << step_line(s) << "\n"
            << "loss        " << (s.train_loss ? loss : kNotMeasured) << "\n"
            << "accuracy    " << accuracy << "\n"
            << (s.dp_epsilon_spent ? "privacy     " + privacy_line(s) + "\n" : std::string())
            << "peers       " << s.peers_alive << " alive of " << s.peers_known << " known (view " << s.view_id << ")\n"
            << "staleness   " << s.staleness << (s.staleness == 1 ? " step" : " steps") << "\n"
            << (s.shape.empty() ? std::string() : "shape       " + shape_line(s) + "\n") << "throughput  " << throughput
            << "\n"
            << (s.max_send_bytes_per_second
                    ? "send cap    " + daemon::format_rate(*s.max_send_bytes_per_second) + " (--max-send-rate)\n"
                    : std::string())
            << "push-sum w  " << weight << "\n"
            << "checkpoint  "
            << (s.last_checkpoint.empty()
                    ? std::string("none yet")
                    : s.last_checkpoint + " (" + daemon::format_duration(s.checkpoint_age_seconds.value_or(NAN)) +
                          " ago)")
            << "\n"
            << "uptime      " << daemon::format_duration(s.uptime_seconds) << "\n";
  if (!s.round_timeout_basis.empty())
    std::cout << "deadlines   round " << daemon::format_duration(s.round_timeout_seconds) << " ("
              << s.round_timeout_basis << ")\n"
              << "            heartbeat " << daemon::format_duration(s.heartbeat_timeout_seconds) << " ("
              << s.heartbeat_timeout_basis << ")\n";
  for (const auto& note : s.notes) std::cout << "note        " << note << "\n";
}

std::string optional_text(const std::optional<double>& v, const char* format, double scale = 1) {
  if (!v) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, format, *v * scale);
  return buf;
}

void print_federation(const std::vector<daemon::SiteRow>& rows) {
  std::printf("%-20s %-9s %8s %6s %9s %9s %10s  %s\n", "SITE", "STATE", "STEP", "EPOCH", "LOSS", "ACCURACY",
              "SAMPLES/S", "LAST HEARD");
  for (const auto& r : rows) {
    const std::string heard = r.self                 ? "(this site)"
                              : r.last_heard_seconds ? daemon::format_duration(*r.last_heard_seconds) + " ago"
                                                     : "never";
    std::printf("%-20s %-9s %8llu %6llu %9s %9s %10s  %s\n", r.site.c_str(), r.state.c_str(),
                static_cast<unsigned long long>(r.step), static_cast<unsigned long long>(r.epoch),
                optional_text(r.train_loss, "%.4g").c_str(), optional_text(r.test_accuracy, "%.1f%%", 100).c_str(),
                optional_text(r.samples_per_second, "%.0f").c_str(), heard.c_str());
  }
  std::fflush(stdout);
}

}  // namespace

void add_status_command(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("status", "Show a running daemon's progress: step, loss, accuracy, peers");
  cmd->footer(
      "Examples:\n"
      "  meridian status                      # the site started in this directory\n"
      "  meridian status --config oregon.toml --json\n"
      "  meridian status --federation         # one row per site, as this site last heard of it\n");
  auto target = std::make_shared<ControlTarget>();
  add_control_target_options(*cmd, *target);
  auto federation = std::make_shared<bool>(false);
  cmd->add_flag("--federation", *federation,
                "Every site of the federation: step, epoch, loss, accuracy, samples/s, last heard");
  cmd->callback([target, federation, &exit_code] {
    daemon::ControlClient client(target->socket_path(),
                                 std::chrono::milliseconds(std::llround(target->timeout_seconds * 1000)));
    if (*federation) {
      const auto rows = client.federation();
      if (target->json) std::cout << daemon::to_json_text(rows) << "\n";
      else print_federation(rows);
      exit_code = 0;
      return;
    }
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
