// Test helper: runs `meridian start` as a real child process whose stdout and stderr go to
// RUN_DIR/log, and reads what the daemon leaves in its run directory (endpoint, result.json,
// checkpoints). Every wait is bounded only as a hang guard; tests assert behaviour, not time.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tests/support/build_paths.h"
#include "tests/support/child_process.h"
#include "tests/support/eventually.h"
#include "tests/support/file_contents.h"

namespace meridian::tests {

// tests::eventually at the pace for what a site process shows (tests::kFromProcess), with a 120 s
// hang guard unless the caller gives another.
inline bool eventually_from_process(const std::function<bool()>& condition,
                                    std::chrono::seconds guard = std::chrono::seconds(120)) {
  return tests::eventually(condition, {guard, tests::kFromProcess.interval});
}

class SiteProcess {
 public:
  // Starts `meridian start ARGS --run-dir RUN_DIR`.
  SiteProcess(std::filesystem::path run_dir, std::vector<std::string> args) : run_dir_(std::move(run_dir)) {
    std::filesystem::create_directories(run_dir_);
    args.insert(args.begin(), {meridian::tests::meridian_binary(), "start"});
    args.push_back("--run-dir");
    args.push_back(run_dir_.string());
    const int log = ::open((run_dir_ / "log").c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    process_ = std::make_unique<tests::ChildProcess>(args, tests::ChildStreams{.out = log, .err = log});
    if (log >= 0) ::close(log);
  }

  const std::filesystem::path& run_dir() const { return run_dir_; }
  std::string log() const { return tests::file_contents(run_dir_ / "log"); }

  // The address the site listens on, once it wrote RUN_DIR/endpoint ("" if it never did).
  std::string endpoint(std::chrono::seconds guard = std::chrono::seconds(60)) const {
    const auto file = run_dir_ / "endpoint";
    if (!tests::eventually([&] { return std::filesystem::exists(file) || exited(); }, {guard, kPollInterval}))
      return "";
    auto text = tests::file_contents(file);
    while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
    return text;
  }

  bool has_result() const { return std::filesystem::exists(run_dir_ / "result.json"); }
  std::filesystem::path checkpoint_dir() const { return run_dir_ / "checkpoints"; }
  std::vector<std::filesystem::path> checkpoints() const {
    std::vector<std::filesystem::path> out;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(checkpoint_dir(), ec))
      if (e.path().extension() == ".mrdn") out.push_back(e.path());
    std::sort(out.begin(), out.end());
    return out;
  }

  void signal(int sig) { process_->signal(sig); }
  void kill_hard() { process_->kill_hard(); }
  // Whether the process has exited (reaps it and keeps its status).
  bool exited() const { return process_->exited(); }
  // Waits for exit (hang guard: SIGKILL after `guard`); the exit code, or -1 when killed by a signal.
  int wait_exit(std::chrono::seconds guard = std::chrono::seconds(120)) {
    return process_->wait_exit({guard, kPollInterval});
  }

 private:
  static constexpr auto kPollInterval = tests::kFromProcess.interval;

  std::filesystem::path run_dir_;
  std::unique_ptr<tests::ChildProcess> process_;
};

}  // namespace meridian::tests
