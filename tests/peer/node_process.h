// Test helper: runs `meridian peer-node` (or any program, e.g. through `ip netns exec`) as a real child
// process with pipes on stdin and stdout, and follows the lines it prints (see cli/peer_node_command.cc).
// Waits are bounded only as hang guards.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

namespace meridian::testing {

class NodeProcess {
 public:
  // `meridian ARGS...`, its standard error discarded.
  explicit NodeProcess(std::vector<std::string> args) : NodeProcess(with_binary(std::move(args)), "/dev/null") {}

  // Any program: argv[0] is looked up in PATH; standard error is appended to `stderr_path`. The child
  // is killed when the test process dies (PR_SET_PDEATHSIG), so a crashed test leaves no site running.
  NodeProcess(std::vector<std::string> argv, const std::string& stderr_path) {
    int in[2], out[2];
    if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0) throw std::runtime_error("pipe failed");
    pid_ = ::fork();
    if (pid_ < 0) throw std::runtime_error("fork failed");
    if (pid_ == 0) {
      ::dup2(in[0], STDIN_FILENO);
      ::dup2(out[1], STDOUT_FILENO);
      const int err = ::open(stderr_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      if (err >= 0) ::dup2(err, STDERR_FILENO);
      ::close(in[0]);
      ::close(in[1]);
      ::close(out[0]);
      ::close(out[1]);
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      std::vector<char*> args;
      for (auto& a : argv) args.push_back(a.data());
      args.push_back(nullptr);
      ::execvp(args[0], args.data());
      ::_exit(127);
    }
    ::close(in[0]);
    ::close(out[1]);
    stdin_ = in[1];
    stdout_ = out[0];
    ::fcntl(stdout_, F_SETFL, O_NONBLOCK);
  }

  ~NodeProcess() {
    if (pid_ > 0 && !reaped_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    if (stdin_ >= 0) ::close(stdin_);
    if (stdout_ >= 0) ::close(stdout_);
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

  void kill_hard() {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    reaped_ = true;
  }

  // Waits for exit (hang guard: SIGKILL after `guard`); returns the exit status or -1 when killed.
  int wait_exit(std::chrono::milliseconds guard = std::chrono::seconds(30)) {
    const auto deadline = std::chrono::steady_clock::now() + guard;
    int status = 0;
    while (::waitpid(pid_, &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > deadline) {
        kill_hard();
        return -1;
      }
      ::usleep(10000);
    }
    reaped_ = true;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

  pid_t pid() const { return pid_; }

 private:
  static std::vector<std::string> with_binary(std::vector<std::string> args) {
    args.insert(args.begin(), MERIDIAN_BINARY);
    return args;
  }

  pid_t pid_ = -1;
  bool reaped_ = false;
  int stdin_ = -1, stdout_ = -1;
  std::vector<std::string> lines_;
  std::size_t next_ = 0;
  bool eof_ = false;
  std::string partial_;
};

}  // namespace meridian::testing
