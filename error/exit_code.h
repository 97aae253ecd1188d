// The exit status of `meridian` when an error ends a command: one per tier (error/error.h), so that a
// service manager and a script can tell what to do from the number alone (docs/operations.md, "Exit
// codes"). The numbers are the BSD sysexits.h codes closest to each tier:
//
//   78  user      EX_CONFIG: the operator's configuration, files or data are wrong. Starting again
//                 with the same input fails again: packaging/meridian@.service does not restart it, and
//                 the container entrypoint exits 78 for the mounts it checks before the daemon starts.
//   69  peer      EX_UNAVAILABLE: the federation could not be reached or misbehaved (no peer within
//                 --join-timeout, a peer's statistics that never came). It may heal by itself: restart.
//   70  internal  EX_SOFTWARE: a bug in Meridian or a failure of the platform under it (out of memory, a
//                 CUDA call). Also any exception that is not an error::Error, since such a throw was not
//                 classified by Meridian's code. Restarted; the message is a bug report's first line.
//
// Other statuses are not errors of a tier: 0 (done, or a graceful stop), 3 (`meridian start`: the run
// had already finished), 100-127 (a command line that does not parse, from CLI11), 130 (a second
// interrupt). Header only.
#pragma once

#include <exception>

#include "error/error.h"

namespace meridian::error {

inline constexpr int kExitUser = 78;
inline constexpr int kExitPeer = 69;
inline constexpr int kExitInternal = 70;

constexpr int exit_code(Tier tier) {
  switch (tier) {
    case Tier::kUser: return kExitUser;
    case Tier::kPeer: return kExitPeer;
    case Tier::kInternal: return kExitInternal;
  }
  return kExitInternal;
}

// The tier of an exception that ended a command: its own for an error::Error, internal for anything
// else.
inline Tier tier_of(const std::exception& e) noexcept {
  const auto* error = dynamic_cast<const Error*>(&e);
  return error ? error->tier() : Tier::kInternal;
}

}  // namespace meridian::error
