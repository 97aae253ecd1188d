#include "cli/algorithm_run.h"

#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>
#include <thread>

#include "cli/child_process.h"
#include "cli/progress_log.h"
#include "cli/site_result.h"
#include "daemon/status/human_format.h"

namespace meridian::cli {
namespace {

using Clock = std::chrono::steady_clock;

double unix_now() { return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count(); }

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Stops every site still running: SIGTERM (a daemon's graceful shutdown), then SIGKILL for those that
// have not ended after the grace period or as soon as another signal arrives. Attached sites' trainers
// get no SIGTERM: their site tells them the run is over, and their script ends as at a normal end;
// those still running after the grace period (waiting for a site that died) are killed.
void stop_all(std::vector<ChildProcess>& children, std::vector<ChildProcess>& trainers, double grace_seconds,
              const InterruptFlag& interrupt) {
  const int signals_before = interrupt.count();
  for (auto& c : children) c.signal(SIGTERM);
  const auto start = Clock::now();
  const auto ended = [](std::vector<ChildProcess>& group) {
    return std::none_of(group.begin(), group.end(), [](ChildProcess& c) { return c.running(); });
  };
  while (seconds_since(start) < grace_seconds && interrupt.count() == signals_before) {
    if (ended(children) && ended(trainers)) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  for (auto* group : {&children, &trainers}) {
    for (auto& c : *group) c.signal(SIGKILL);
    for (auto& c : *group)
      while (c.running()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

std::string how_it_ended(int code) {
  return code > 128 ? "was killed by signal " + std::to_string(code - 128)
                    : "exited with status " + std::to_string(code);
}

std::string with_log_tail(const std::string& message, const std::filesystem::path& log_file, std::size_t lines) {
  const std::string tail = tail_of_file(log_file, lines);
  if (tail.empty()) return message + "\n(" + log_file.string() + " is empty)";
  return message + "\nlast lines of " + log_file.string() + ":\n" + tail;
}

std::string with_log_tail(const std::string& message, const SiteLaunch& site, std::size_t lines) {
  return with_log_tail(message, site.log_file, lines);
}

std::string live_text(const std::string& algo, int running, int total, std::uint64_t step, std::optional<double> best,
                      double elapsed) {
  char accuracy[32] = "-";
  if (best) std::snprintf(accuracy, sizeof accuracy, "%.1f%%", *best * 100);
  char text[200];
  std::snprintf(text, sizeof text, "%-9s  sites running %d/%d  step %llu  best accuracy %s  %s", algo.c_str(), running,
                total, static_cast<unsigned long long>(step), accuracy, daemon::format_duration(elapsed).c_str());
  return text;
}

}  // namespace

AlgorithmOutcome run_algorithm(const std::string& algo, const std::vector<SiteLaunch>& sites,
                               const AlgorithmRunSettings& settings, const AveragedModelEvaluator& evaluate,
                               const InterruptFlag& interrupt, StatusLine& status) {
  prepare_site_directories(sites);
  AlgorithmOutcome outcome;
  outcome.algo = algo;
  outcome.sites = static_cast<int>(sites.size());

  std::vector<ProgressLogFollower> followers;
  for (const auto& s : sites) {
    followers.emplace_back(s.run_dir / "progress.jsonl");
    if (!s.trainer_program.empty()) followers.emplace_back(s.trainer_evaluations);
  }

  std::vector<ChildProcess> children;
  children.reserve(sites.size());
  // Attached sites' trainers (--trainer-command): trainers[i] is the trainer of sites[trainer_site[i]].
  std::vector<ChildProcess> trainers;
  std::vector<std::size_t> trainer_site;
  trainers.reserve(sites.size());
  status.print(algo + ": starting " + std::to_string(sites.size()) + " sites (logs in " +
               sites.front().run_dir.parent_path().string() + "/<site>/log.txt)");
  outcome.launch_time = unix_now();
  const auto launched = Clock::now();
  try {
    for (std::size_t i = 0; i < sites.size(); ++i) {
      const SiteLaunch& s = sites[i];
      children.emplace_back(settings.program, s.arguments, s.log_file);
      if (s.trainer_program.empty()) continue;
      trainers.emplace_back(s.trainer_program, s.trainer_arguments, s.trainer_log_file);
      trainer_site.push_back(i);
    }
  } catch (...) {
    stop_all(children, trainers, settings.grace_seconds, interrupt);
    throw;
  }

  std::uint64_t step = 0;
  std::optional<double> best;
  const auto read_progress = [&] {
    for (auto& f : followers) {
      for (auto& r : f.read_new()) {
        step = std::max(step, r.step);
        if (r.test_accuracy) best = std::max(best.value_or(0.0), *r.test_accuracy);
        outcome.progress.push_back(std::move(r));
      }
    }
  };

  // The loop: one pass every 200 ms is quick enough for a person watching and costs nothing.
  while (true) {
    std::optional<std::size_t> failed;
    int running = 0;
    for (std::size_t i = 0; i < children.size(); ++i) {
      const auto status_code = children[i].poll();
      if (!status_code) ++running;
      else if (*status_code != 0 && !failed) failed = i;
    }
    try {
      read_progress();
    } catch (const ProgressLogError& e) {
      stop_all(children, trainers, settings.grace_seconds, interrupt);
      throw SimulationFailed(algo + ": " + e.what());
    }
    // A trainer that fails fails the run as a site would (nobody starts it again here). It comes first:
    // its site, left without a trainer, may stop or fail as a consequence.
    std::optional<std::size_t> trainer_failed;
    int trainers_running = 0;
    for (std::size_t i = 0; i < trainers.size(); ++i) {
      const auto status_code = trainers[i].poll();
      if (!status_code) ++trainers_running;
      else if (*status_code != 0 && !trainer_failed) trainer_failed = i;
    }
    if (trainer_failed) {
      const SiteLaunch& site = sites[trainer_site[*trainer_failed]];
      const int code = *trainers[*trainer_failed].exit_status();
      stop_all(children, trainers, settings.grace_seconds, interrupt);
      throw SimulationFailed(
          with_log_tail(algo + ": the trainer of " + site.name + " (--trainer-command) " + how_it_ended(code),
                        site.trainer_log_file, settings.log_tail_lines));
    }
    if (failed) {
      const SiteLaunch& site = sites[*failed];
      const int code = *children[*failed].exit_status();
      stop_all(children, trainers, settings.grace_seconds, interrupt);
      throw SimulationFailed(
          with_log_tail(algo + ": " + site.name + " " + how_it_ended(code), site, settings.log_tail_lines));
    }
    // A trainer reports its last evaluation after its site's end.
    if (running == 0 && trainers_running == 0) break;
    if (settings.stop_at_accuracy &&
        seconds_to_accuracy(accuracy_curve(outcome), outcome.sites, *settings.stop_at_accuracy)) {
      char reached[96];
      std::snprintf(reached, sizeof reached, ": every site reached %.1f%%; stopping %d site(s)",
                    *settings.stop_at_accuracy * 100, running);
      status.print(algo + reached);
      outcome.stopped_at_target = true;
      stop_all(children, trainers, settings.grace_seconds, interrupt);
      // A graceful stop ends with status 0; anything else is a failure like any other.
      for (std::size_t i = 0; i < children.size(); ++i) {
        const int code = children[i].exit_status().value_or(-1);
        if (code != 0)
          throw SimulationFailed(
              with_log_tail(algo + ": " + sites[i].name + " did not stop cleanly (status " + std::to_string(code) + ")",
                            sites[i], settings.log_tail_lines));
      }
      for (std::size_t i = 0; i < trainers.size(); ++i) {
        const SiteLaunch& site = sites[trainer_site[i]];
        const int code = trainers[i].exit_status().value_or(-1);
        if (code != 0)
          throw SimulationFailed(with_log_tail(
              algo + ": the trainer of " + site.name + " did not stop cleanly (status " + std::to_string(code) + ")",
              site.trainer_log_file, settings.log_tail_lines));
      }
      break;
    }
    if (interrupt.count() > 0) {
      status.print(algo + ": interrupted, stopping " + std::to_string(running) +
                   " site(s) (Ctrl-C again to kill them at once)");
      stop_all(children, trainers, settings.grace_seconds, interrupt);
      throw SimulationInterrupted("interrupted: every site of " + algo + " was stopped; logs are in " +
                                  sites.front().run_dir.parent_path().string());
    }
    const double elapsed = seconds_since(launched);
    if (elapsed > settings.timeout_seconds) {
      stop_all(children, trainers, settings.grace_seconds, interrupt);
      throw SimulationFailed(algo + ": " + std::to_string(running) + " site(s) still running after --timeout " +
                             daemon::format_duration(settings.timeout_seconds) + "; logs are in " +
                             sites.front().run_dir.parent_path().string());
    }
    status.update(live_text(algo, running, outcome.sites, step, best, elapsed));
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  outcome.wall_seconds = seconds_since(launched);
  // The end records were appended before each site exited.
  try {
    read_progress();
  } catch (const ProgressLogError& e) {
    throw SimulationFailed(algo + ": " + e.what());
  }

  std::vector<std::filesystem::path> checkpoints;
  for (const auto& s : sites) {
    try {
      outcome.results.push_back(read_site_result(s.run_dir / "result.json"));
    } catch (const SiteResultError& e) {
      throw SimulationFailed(
          with_log_tail(algo + ": " + s.name + " exited 0 but " + e.what(), s, settings.log_tail_lines));
    }
    checkpoints.push_back(outcome.results.back().final_checkpoint);
  }
  // An attached site does not evaluate the trainer's model: its accuracy is the last one its trainer
  // reported.
  for (auto& result : outcome.results) {
    if (result.test_accuracy) continue;
    for (const auto& r : outcome.progress)
      if (r.site == result.site && r.test_accuracy) result.test_accuracy = r.test_accuracy;
  }
  status.print(algo + ": " + std::to_string(outcome.sites) + " sites finished in " +
               daemon::format_duration(outcome.wall_seconds));

  if (evaluate) {
    try {
      outcome.averaged_accuracy = evaluate(checkpoints, sites.front().config);
    } catch (const std::exception& e) {
      status.print(algo + ": the averaged model could not be evaluated: " + e.what());
    }
  }
  return outcome;
}

}  // namespace meridian::cli
