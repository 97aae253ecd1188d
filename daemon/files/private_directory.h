// A directory that only this daemon's user can change: the run directory, a checkpoint directory, the
// control socket's directory. Another local user who could write there could plant a link that turns
// the daemon's next write against a file of the daemon's user, or replace its checkpoints.
#pragma once

#include <filesystem>
#include <string>

#include "error/error.h"

namespace meridian::daemon {

class PrivateDirectoryError : public error::UserError {
 public:
  using error::UserError::UserError;
};

// Creates `dir` if it is missing (its missing parents as usual, `dir` itself with mode 0700), then
// checks that it is a directory owned by this process's effective user that neither its group nor
// others can write. An existing directory is used as it is (0755 is fine; its mode is not changed).
// `what` names it in errors ("run directory"). Throws PrivateDirectoryError naming the directory, its
// owner and mode, and the fix.
void make_private_directory(const std::filesystem::path& dir, const std::string& what);

}  // namespace meridian::daemon
