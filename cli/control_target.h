// How `meridian status`, `peers` and `leave` find the daemon they talk to: --socket PATH, or the
// control socket named in a site's --config FILE, or the default RUN_DIR/control.sock of a site
// started in the current directory. Shared by those three commands.
#pragma once

#include <CLI/CLI.hpp>

#include <string>

namespace meridian::cli {

struct ControlTarget {
  std::string socket;
  std::string config;
  double timeout_seconds = 5;
  bool json = false;

  // The socket path to use. Throws daemon::SiteConfigError (an error::UserError) for an unreadable --config.
  std::string socket_path() const;
};

// Adds --socket, --config, --timeout and --json to `command`.
void add_control_target_options(CLI::App& command, ControlTarget& target);

}  // namespace meridian::cli
