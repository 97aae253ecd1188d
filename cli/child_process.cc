#include "cli/child_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <deque>
#include <fstream>
#include <stdexcept>

#include "error/error.h"

namespace meridian::cli {

ChildProcess::ChildProcess(const std::filesystem::path& program, const std::vector<std::string>& arguments,
                           const std::filesystem::path& log_file) {
  // Everything the child needs is prepared before fork: between fork and exec only async-signal-safe
  // calls are allowed (the parent may have other threads, e.g. ZeroMQ's).
  std::vector<std::string> owned;
  owned.reserve(arguments.size() + 1);
  owned.push_back(program.string());
  owned.insert(owned.end(), arguments.begin(), arguments.end());
  std::vector<char*> argv;
  for (auto& a : owned) argv.push_back(a.data());
  argv.push_back(nullptr);

  const int log_fd = ::open(log_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (log_fd < 0) throw error::UserError("cannot open log file " + log_file.string() + ": " + std::strerror(errno));
  const int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  const pid_t parent = ::getpid();

  const pid_t pid = ::fork();
  if (pid < 0) {
    const int error = errno;
    ::close(log_fd);
    if (null_fd >= 0) ::close(null_fd);
    throw error::InternalError("cannot start " + program.string() + ": fork: " + std::strerror(error));
  }
  if (pid == 0) {
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    // The parent may have died between fork and prctl; then nobody would ever stop this child.
    if (::getppid() != parent) ::_exit(1);
    // The parent may ignore or block signals (e.g. while it handles Ctrl-C); the site starts clean.
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::signal(SIGINT, SIG_DFL);
    ::signal(SIGTERM, SIG_DFL);
    ::signal(SIGPIPE, SIG_DFL);
    if (null_fd >= 0) ::dup2(null_fd, STDIN_FILENO);
    ::dup2(log_fd, STDOUT_FILENO);
    ::dup2(log_fd, STDERR_FILENO);
    ::execv(argv[0], argv.data());
    const char* reason = std::strerror(errno);
    const char prefix[] = "meridian simulate: cannot execute the site's program: ";
    [[maybe_unused]] auto w1 = ::write(STDERR_FILENO, prefix, sizeof prefix - 1);
    [[maybe_unused]] auto w2 = ::write(STDERR_FILENO, reason, std::strlen(reason));
    [[maybe_unused]] auto w3 = ::write(STDERR_FILENO, "\n", 1);
    ::_exit(127);
  }
  // Also set the group from the parent side so that signal() works even before the child ran.
  ::setpgid(pid, pid);
  ::close(log_fd);
  if (null_fd >= 0) ::close(null_fd);
  pid_ = pid;
}

ChildProcess::ChildProcess(ChildProcess&& other) noexcept : pid_(other.pid_), status_(other.status_) {
  other.pid_ = -1;
}

ChildProcess::~ChildProcess() {
  if (pid_ <= 0 || status_) return;
  signal(SIGKILL);
  int status = 0;
  while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
}

std::optional<int> ChildProcess::poll() {
  if (status_ || pid_ <= 0) return status_;
  int status = 0;
  const pid_t r = ::waitpid(pid_, &status, WNOHANG);
  if (r == pid_) {
    if (WIFEXITED(status)) status_ = WEXITSTATUS(status);
    else if (WIFSIGNALED(status)) status_ = 128 + WTERMSIG(status);
    else status_ = 255;
  } else if (r < 0 && errno == ECHILD) {
    status_ = 255;  // reaped elsewhere: treat as ended with an unknown status
  }
  return status_;
}

void ChildProcess::signal(int signal) {
  if (pid_ <= 0 || status_) return;
  // The group first (the site and anything it started); the pid itself if the group is not there yet.
  if (::kill(-pid_, signal) < 0) ::kill(pid_, signal);
}

std::string tail_of_file(const std::filesystem::path& file, std::size_t lines) {
  std::ifstream in(file);
  if (!in) return "";
  std::deque<std::string> last;
  for (std::string line; std::getline(in, line);) {
    last.push_back(std::move(line));
    if (last.size() > lines) last.pop_front();
  }
  std::string out;
  for (const auto& l : last) out += l + "\n";
  return out;
}

}  // namespace meridian::cli
