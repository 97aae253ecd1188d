#include "daemon/files/private_directory.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace meridian::daemon {
namespace {

std::string octal_mode(mode_t mode) {
  char text[8];
  std::snprintf(text, sizeof text, "%04o", static_cast<unsigned>(mode & 07777));
  return text;
}

}  // namespace

void make_private_directory(const std::filesystem::path& given, const std::string& what) {
  // "runs/a/" is "runs/a", whose parent is "runs".
  const std::filesystem::path dir = given.has_filename() ? given : given.parent_path();
  const std::string name = what + " " + dir.string();
  std::error_code ec;
  if (dir.has_parent_path() && !std::filesystem::exists(dir.parent_path(), ec)) {
    std::filesystem::create_directories(dir.parent_path(), ec);
    if (ec) throw PrivateDirectoryError("cannot create " + name + ": " + ec.message());
  }
  // mkdir, not create_directories: the mode is set as the directory appears, so nobody else can enter
  // it in between (the umask can only narrow 0700).
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
    throw PrivateDirectoryError("cannot create " + name + ": " + std::strerror(errno));
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) throw PrivateDirectoryError("cannot use " + name + ": " + std::strerror(errno));
  if (!S_ISDIR(st.st_mode)) throw PrivateDirectoryError(name + " exists and is not a directory");
  const uid_t me = ::geteuid();
  if (st.st_uid != me) {
    throw PrivateDirectoryError(name + " belongs to uid " + std::to_string(st.st_uid) + ", not to uid " +
                                std::to_string(me) + " that this daemon runs as (mode " + octal_mode(st.st_mode) +
                                "): another user could change its files. Run the daemon as its owner, 'chown " +
                                std::to_string(me) + " " + dir.string() + "', or choose another directory");
  }
  if (st.st_mode & (S_IWGRP | S_IWOTH)) {
    throw PrivateDirectoryError(name + " can be written by its group or by others (mode " + octal_mode(st.st_mode) +
                                ", owner uid " + std::to_string(st.st_uid) +
                                "): another user could plant files or links in it. Run 'chmod 700 " + dir.string() +
                                "', or choose another directory");
  }
}

}  // namespace meridian::daemon
