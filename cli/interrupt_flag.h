// Ctrl-C and SIGTERM for a command that must clean up after itself (`meridian simulate` stops its
// sites before it exits). While an InterruptFlag lives, SIGINT and SIGTERM only count; the command
// checks count() in its loop. The previous handlers come back when it is destroyed.
// One at a time per process; count() may be read from any thread.
#pragma once

#include <csignal>

namespace meridian::cli {

class InterruptFlag {
 public:
  InterruptFlag();
  ~InterruptFlag();
  InterruptFlag(const InterruptFlag&) = delete;
  InterruptFlag& operator=(const InterruptFlag&) = delete;

  // Signals received since construction (a second Ctrl-C means "stop now, do not wait").
  int count() const;
  // The last signal received (SIGINT or SIGTERM), 0 before any.
  int last_signal() const;

 private:
  struct sigaction previous_int_ {
  }, previous_term_{};
};

}  // namespace meridian::cli
