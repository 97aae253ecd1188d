// SIGHUP for a foreground daemon: the conventional "reload your configuration". The daemon reads its
// roster file again (daemon/control/roster_file.h) when take() reports a signal.
//
// Process-wide: install() replaces the handler of SIGHUP; the handler only sets an atomic flag.
#pragma once

namespace meridian::daemon {

class ReloadSignal {
 public:
  // Installs the handler (idempotent).
  static void install();
  // Whether SIGHUP arrived since the last call (clears it).
  static bool take();
};

}  // namespace meridian::daemon
