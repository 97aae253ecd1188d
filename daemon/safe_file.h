// Writing files where a link may have been planted (the run directory, the roster file's folder):
// never through a link, and never half-written where a reader can see it.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <string_view>

namespace meridian::daemon {

// Replaces `path` with `text`: writes a new file under a random name beside it (created exclusively,
// so never through a link, with `mode`), syncs it and renames it over `path`. A link at `path` is
// itself replaced, never followed. Throws error::UserError naming the file and the system's reason;
// `path` is then unchanged.
void replace_file(const std::filesystem::path& path, std::string_view text, mode_t mode);

// Appends `text` to `path`, creating it with `mode` if missing. Throws error::UserError naming the
// file when it cannot be written, or when `path` is a symbolic link (which is not followed).
void append_to_file(const std::filesystem::path& path, std::string_view text, mode_t mode);

}  // namespace meridian::daemon
