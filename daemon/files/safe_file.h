// Writing files where a link may have been planted (the run directory, the roster file's folder, the
// checkpoint folder): never through a link, and never half-written where a reader can see it.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace meridian::daemon {

// Writes all of [data, data + size) to `fd`, retrying on EINTR and short writes; returns 0 or the errno.
int write_all(int fd, const void* data, std::size_t size);

// Why a replacement did not end durably in place.
struct ReplaceFailure {
  std::string message;    // names `what` and the file, the step that failed and the system's reason
  bool replaced = false;  // the new contents are in place; only syncing the directory (the rename's durability) failed
};

// The one writer of whole files: creates a file beside `path` under a random name, ".NAME.tmp-PID-RANDOM"
// (exclusively, so never through a link), lets `write(fd)` fill it (it returns 0 or the errno of a failure), sets
// `mode`, syncs it, renames it over `path` and syncs the directory. A link at `path` is itself
// replaced, never followed. Returns nullopt on success; on a failure before the rename the temporary
// file is removed and `path` is unchanged. `what` starts the messages ("checkpoint" gives "cannot write
// checkpoint PATH: fsync: ...").
std::optional<ReplaceFailure> replace_file_with(const std::filesystem::path& path, mode_t mode, std::string_view what,
                                                const std::function<int(int fd)>& write);

// Replaces `path` with `text` (replace_file_with). Throws error::UserError naming the file and the
// system's reason when the new contents are not in place; `path` is then unchanged.
void replace_file(const std::filesystem::path& path, std::string_view text, mode_t mode);

// Appends `text` to `path`, creating it with `mode` if missing. Throws error::UserError naming the
// file when it cannot be written, or when `path` is a symbolic link (which is not followed).
void append_to_file(const std::filesystem::path& path, std::string_view text, mode_t mode);

}  // namespace meridian::daemon
