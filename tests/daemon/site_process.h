// Test helper: runs `meridian start` as a real child process whose stdout and stderr go to
// RUN_DIR/log, and reads what the daemon leaves in its run directory (endpoint, result.json,
// checkpoints). Every wait is bounded only as a hang guard; tests assert behaviour, not time.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace meridian::testing {

inline std::string read_text(const std::filesystem::path& file) {
  std::ifstream in(file);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Polls `done` every 50 ms until it is true or `guard` passes; returns its last value.
inline bool eventually(const std::function<bool()>& done, std::chrono::seconds guard = std::chrono::seconds(120)) {
  const auto deadline = std::chrono::steady_clock::now() + guard;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return true;
}

class SiteProcess {
 public:
  // Starts `meridian start ARGS --run-dir RUN_DIR`.
  SiteProcess(std::filesystem::path run_dir, std::vector<std::string> args) : run_dir_(std::move(run_dir)) {
    std::filesystem::create_directories(run_dir_);
    args.push_back("--run-dir");
    args.push_back(run_dir_.string());
    const std::string log = (run_dir_ / "log").string();
    pid_ = ::fork();
    if (pid_ < 0) throw std::runtime_error("fork failed");
    if (pid_ == 0) {
      const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      if (fd >= 0) {
        ::dup2(fd, STDOUT_FILENO);
        ::dup2(fd, STDERR_FILENO);
      }
      std::vector<char*> argv;
      std::string bin = MERIDIAN_BINARY, start = "start";
      argv.push_back(bin.data());
      argv.push_back(start.data());
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(bin.c_str(), argv.data());
      ::_exit(127);
    }
  }
  ~SiteProcess() {
    if (pid_ > 0 && !reaped_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  SiteProcess(const SiteProcess&) = delete;
  SiteProcess& operator=(const SiteProcess&) = delete;

  const std::filesystem::path& run_dir() const { return run_dir_; }
  std::string log() const { return read_text(run_dir_ / "log"); }

  // The address the site listens on, once it wrote RUN_DIR/endpoint ("" if it never did).
  std::string endpoint(std::chrono::seconds guard = std::chrono::seconds(60)) const {
    const auto file = run_dir_ / "endpoint";
    if (!eventually([&] { return std::filesystem::exists(file) || exited(); }, guard)) return "";
    auto text = read_text(file);
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

  void signal(int sig) { ::kill(pid_, sig); }
  void kill_hard() {
    if (reaped_) return;
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, &status_, 0);
    reaped_ = true;
  }
  // Whether the process has exited (reaps it and keeps its status).
  bool exited() const {
    if (reaped_) return true;
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      reaped_ = true;
      status_ = status;
    }
    return reaped_;
  }
  // Waits for exit (hang guard: SIGKILL after `guard`); the exit code, or -1 when killed by a signal.
  int wait_exit(std::chrono::seconds guard = std::chrono::seconds(120)) {
    if (!eventually([&] { return exited(); }, guard)) kill_hard();
    return WIFEXITED(status_) ? WEXITSTATUS(status_) : -1;
  }

 private:
  std::filesystem::path run_dir_;
  pid_t pid_ = -1;
  mutable bool reaped_ = false;
  mutable int status_ = 0;
};

}  // namespace meridian::testing
