// Test helper: runs `meridian peer-node` (or any program, e.g. through `ip netns exec`) as a real child
// process with pipes on stdin and stdout, and follows the lines it prints (see cli/peer_node_command.cc).
// Waits are bounded only as hang guards.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "tests/support/build_paths.h"
#include "tests/support/child_process.h"

namespace meridian::tests {

class NodeProcess {
 public:
  // `meridian ARGS...`, its standard error discarded.
  explicit NodeProcess(std::vector<std::string> args) : NodeProcess(with_binary(std::move(args)), "/dev/null") {}

  // Any program: argv[0] is looked up in PATH; standard error is appended to `stderr_path`. The child
  // is killed when the test process dies (PR_SET_PDEATHSIG), so a crashed test leaves no site running.
  NodeProcess(const std::vector<std::string>& argv, const std::string& stderr_path) {
    int in[2], out[2];
    if (::pipe2(in, O_CLOEXEC) != 0) throw std::runtime_error("pipe failed");
    if (::pipe2(out, O_CLOEXEC) != 0) {
      ::close(in[0]);
      ::close(in[1]);
      throw std::runtime_error("pipe failed");
    }
    stdin_ = in[1];
    stdout_ = out[0];
    const int err = ::open(stderr_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    try {
      process_ = std::make_unique<tests::ChildProcess>(argv, tests::ChildStreams{in[0], out[1], err}, true);
    } catch (...) {
      close_child_ends(in[0], out[1], err);
      close_own_ends();
      throw;
    }
    close_child_ends(in[0], out[1], err);
    ::fcntl(stdout_, F_SETFL, O_NONBLOCK);
  }

  ~NodeProcess() {
    process_.reset();
    close_own_ends();
  }

  NodeProcess(const NodeProcess&) = delete;
  NodeProcess& operator=(const NodeProcess&) = delete;

  // Reads lines until `pred` accepts one (returns it) or the hang guard expires (returns "").
  std::string wait_line(const std::function<bool(const std::string&)>& pred,
                        std::chrono::milliseconds guard = std::chrono::seconds(60)) {
    const auto deadline = std::chrono::steady_clock::now() + guard;
    while (true) {
      for (; next_ < lines_.size(); ++next_)
        if (pred(lines_[next_])) return lines_[next_++];
      if (eof_) return "";
      // Always look at least once (a zero timeout just checks), then give up at the deadline.
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      pollfd p{stdout_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(std::clamp<long>(left.count(), 0, 100))) <= 0) {
        if (left.count() <= 0) return "";
        continue;
      }
      char buf[4096];
      const ssize_t n = ::read(stdout_, buf, sizeof buf);
      if (n <= 0) {
        if (n == 0) eof_ = true;  // the process closed its output
        continue;
      }
      partial_.append(buf, static_cast<std::size_t>(n));
      for (auto nl = partial_.find('\n'); nl != std::string::npos; nl = partial_.find('\n')) {
        lines_.push_back(partial_.substr(0, nl));
        partial_.erase(0, nl + 1);
      }
    }
  }

  // The last line starting with `prefix` among everything printed so far (reads what is available
  // without waiting); "" when there is none.
  std::string latest(const std::string& prefix) {
    wait_line([](const std::string&) { return false; }, std::chrono::milliseconds(1));
    for (auto it = lines_.rbegin(); it != lines_.rend(); ++it)
      if (it->rfind(prefix, 0) == 0) return *it;
    return "";
  }

  // The next line starting with `prefix`.
  std::string wait_prefix(const std::string& prefix, std::chrono::milliseconds guard = std::chrono::seconds(60)) {
    return wait_line([&](const std::string& l) { return l.rfind(prefix, 0) == 0; }, guard);
  }

  // True once the process has closed its standard output (it exited, normally or not); reads what is
  // available without waiting.
  bool output_closed() {
    latest("");
    return eof_;
  }

  void write_line(const std::string& line) {
    const std::string s = line + "\n";
    [[maybe_unused]] auto n = ::write(stdin_, s.data(), s.size());
  }

  void kill_hard() { process_->kill_hard(); }

  // Waits for exit (hang guard: SIGKILL after `guard`); returns the exit status or -1 when killed.
  int wait_exit(std::chrono::milliseconds guard = std::chrono::seconds(30)) {
    return process_->wait_exit({guard, std::chrono::milliseconds(10)});
  }

  pid_t pid() const { return process_->pid(); }

 private:
  static std::vector<std::string> with_binary(std::vector<std::string> args) {
    args.insert(args.begin(), meridian::tests::meridian_binary());
    return args;
  }

  static void close_child_ends(int in, int out, int err) {
    ::close(in);
    ::close(out);
    if (err >= 0) ::close(err);
  }
  void close_own_ends() {
    if (stdin_ >= 0) ::close(stdin_);
    if (stdout_ >= 0) ::close(stdout_);
  }

  std::unique_ptr<tests::ChildProcess> process_;
  int stdin_ = -1, stdout_ = -1;
  std::vector<std::string> lines_;
  std::size_t next_ = 0;
  bool eof_ = false;
  std::string partial_;
};

}  // namespace meridian::tests
