// SIGINT/SIGTERM for a foreground daemon: the first signal asks for a graceful stop (the daemon polls
// requested()); a second one ends the process at once with exit status 130.
//
// Process-wide: install() replaces the handlers of SIGINT and SIGTERM; the handler only touches an
// atomic counter and, the second time, calls _exit (both async-signal-safe).
#pragma once

namespace meridian::daemon {

class ShutdownSignals {
 public:
  // Installs the handlers (idempotent).
  static void install();
  // Whether a stop was requested (a signal arrived, or request() was called, e.g. by `meridian leave`).
  static bool requested();
  // Asks for a graceful stop as a signal would (a later signal then ends the process at once).
  static void request();
};

}  // namespace meridian::daemon
