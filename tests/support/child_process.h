// Real child processes for tests: a program started beside the test (ChildProcess), and a program run
// to completion with what it printed (run_command, run_shell). For the programs the suite drives see
// tests/support/meridian_command.h (a `meridian` command), tests/daemon/site_process.h (a `meridian
// start` site) and tests/peer/node_process.h (a line-driven `meridian peer-node`).
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "tests/support/eventually.h"

namespace meridian::tests {

// The parent's descriptors that become the child's standard streams; -1 leaves the test's own. The
// caller keeps ownership and may close them once the ChildProcess is constructed.
struct ChildStreams {
  int in = -1;
  int out = -1;
  int err = -1;
};

// A program running beside the test. The destructor SIGKILLs and reaps it if it still runs, so a test
// that fails half-way leaves nothing behind. One thread uses an instance; not copyable.
class ChildProcess {
 public:
  // Starts `argv` (argv[0] looked up in PATH). With `die_with_test` the kernel kills the child when the
  // test's thread that started it dies (PR_SET_PDEATHSIG), even by SIGKILL. Throws std::runtime_error
  // when no process can be created; a program that cannot be executed exits with 127.
  explicit ChildProcess(const std::vector<std::string>& argv, ChildStreams streams = {}, bool die_with_test = false) {
    // Everything the child needs is prepared here: between fork and exec a threaded test may not allocate.
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    pid_ = ::fork();
    if (pid_ < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
    if (pid_ == 0) {
      if (streams.in >= 0) ::dup2(streams.in, STDIN_FILENO);
      if (streams.out >= 0) ::dup2(streams.out, STDOUT_FILENO);
      if (streams.err >= 0) ::dup2(streams.err, STDERR_FILENO);
      if (die_with_test) ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      ::execvp(args[0], args.data());
      ::_exit(127);
    }
  }
  ~ChildProcess() { kill_hard(); }
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  void signal(int sig) const { ::kill(pid_, sig); }

  // Whether the process has exited; reaps it (without waiting) and keeps its status.
  bool exited() const {
    int status = 0;
    if (!reaped_ && ::waitpid(pid_, &status, WNOHANG) == pid_) {
      reaped_ = true;
      status_ = status;
    }
    return reaped_;
  }
  // SIGKILL and reap; nothing once it has exited.
  void kill_hard() {
    if (reaped_) return;
    ::kill(pid_, SIGKILL);
    while (::waitpid(pid_, &status_, 0) < 0 && errno == EINTR) {
    }
    reaped_ = true;
  }
  // Waits for the exit; the exit code, or -1 when a signal ended the process.
  int wait() {
    while (!reaped_ && ::waitpid(pid_, &status_, 0) < 0 && errno == EINTR) {
    }
    reaped_ = true;
    return exit_code();
  }
  // wait() with a hang guard: SIGKILL (and -1) once `polling.guard` has passed.
  int wait_exit(Polling polling) {
    if (!eventually([&] { return exited(); }, polling)) kill_hard();
    return exit_code();
  }

 private:
  int exit_code() const { return WIFEXITED(status_) ? WEXITSTATUS(status_) : -1; }

  pid_t pid_ = -1;
  mutable bool reaped_ = false;
  mutable int status_ = 0;
};

struct CommandResult {
  int exit_code = -1;  // -1 when a signal ended the program; 127 when it could not be started
  std::string output;  // standard output and standard error together, in the order they were written
};

// Runs `argv` (argv[0] looked up in PATH, no shell) until it exits; its standard input is the test's.
// Throws std::runtime_error when no child process can be created.
inline CommandResult run_command(const std::vector<std::string>& argv) {
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  std::optional<ChildProcess> child;
  try {
    child.emplace(argv, ChildStreams{.out = out[1], .err = out[1]});
  } catch (...) {
    ::close(out[0]);
    ::close(out[1]);
    throw;
  }
  ::close(out[1]);
  CommandResult result;
  char buf[4096];
  for (ssize_t n; (n = ::read(out[0], buf, sizeof buf)) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    result.output.append(buf, static_cast<std::size_t>(n));
  }
  ::close(out[0]);
  result.exit_code = child->wait();
  return result;
}

// Runs `command` through /bin/sh -c; redirections in `command` apply after the collection above (so
// "... 2> FILE" leaves only standard output in `output`).
inline CommandResult run_shell(const std::string& command) { return run_command({"/bin/sh", "-c", command}); }

}  // namespace meridian::tests
