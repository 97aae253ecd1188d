// One child process that `meridian simulate` starts and owns: a real `meridian start` for one site.
// The child runs in its own process group (so a Ctrl-C at the terminal reaches only the parent, which
// then stops its children in order), writes stdout and stderr to one log file, reads /dev/null, and is
// killed by the kernel if the parent dies (PR_SET_PDEATHSIG), so no site outlives a crashed simulate.
//
// Not thread-safe; use from one thread (the thread that started it: the death signal is tied to it).
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace meridian::cli {

class ChildProcess {
 public:
  // Starts `program` with `arguments` (argv[1..]). Throws error::UserError naming the log file when
  // it cannot be opened, error::InternalError naming the program when fork fails. A program that cannot be executed
  // shows up as exit code 127 with the reason in the log.
  ChildProcess(const std::filesystem::path& program, const std::vector<std::string>& arguments,
               const std::filesystem::path& log_file);
  // Kills (SIGKILL) and reaps the child if it is still running.
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  ChildProcess(ChildProcess&& other) noexcept;
  ChildProcess& operator=(ChildProcess&&) = delete;

  pid_t pid() const { return pid_; }

  // Reaps the child if it has ended, without blocking. Returns nullopt while it runs.
  std::optional<int> poll();
  // The exit status once poll() has seen the end: the exit code, or 128 + signal number when a signal
  // ended it (as a shell reports it).
  std::optional<int> exit_status() const { return status_; }
  bool running() { return !poll().has_value(); }
  // Sends `signal` to the child's process group (the child and anything it started). No-op once ended.
  void signal(int signal);

 private:
  pid_t pid_ = -1;
  std::optional<int> status_;
};

// The last `lines` lines of a text file (for showing why a site failed); "" when it cannot be read.
std::string tail_of_file(const std::filesystem::path& file, std::size_t lines);

}  // namespace meridian::cli
