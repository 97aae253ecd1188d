// Runs the built `meridian` binary as a user would (a real process, stdout and stderr together) and
// returns its exit code and output. For tests only.
#pragma once

#include <string>

#include "tests/support/build_paths.h"
#include "tests/support/child_process.h"

namespace meridian::tests {

using CommandOutput = CommandResult;

// `args` is appended to the binary's path and run through the shell (so "... 2> FILE" keeps standard
// error out of the output); `environment` (e.g. "LD_DEBUG=libs") is set for that process only. Throws
// std::runtime_error when no child process can be created.
inline CommandOutput run_meridian(const std::string& args, const std::string& environment = {}) {
  return run_shell((environment.empty() ? "" : environment + " ") + std::string(meridian::tests::meridian_binary()) +
                   " " + args);
}

}  // namespace meridian::tests
