#include "daemon/safe_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

#include "error/error.h"

namespace meridian::daemon {
namespace {

// Writes all of `text`; the errno of the failure, or 0.
int write_all(int fd, std::string_view text) {
  std::size_t written = 0;
  while (written < text.size()) {
    const ssize_t n = ::write(fd, text.data() + written, text.size() - written);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    written += static_cast<std::size_t>(n);
  }
  return 0;
}

}  // namespace

void replace_file(const std::filesystem::path& path, std::string_view text, mode_t mode) {
  const auto dir = path.has_parent_path() ? path.parent_path() : std::filesystem::path(".");
  std::string tmp_name = ".";
  tmp_name += path.filename().string();
  tmp_name += ".XXXXXX";
  std::string tmp = (dir / tmp_name).string();
  // mkostemp creates with O_CREAT | O_EXCL under a name nobody could predict.
  const int fd = ::mkostemp(tmp.data(), O_CLOEXEC);
  if (fd < 0)
    throw error::UserError("cannot write " + path.string() + ": cannot create a file in " + dir.string() + ": " +
                           std::strerror(errno));
  const auto fail = [&](const std::string& step, int err) {
    ::unlink(tmp.c_str());
    return error::UserError("cannot write " + path.string() + " (" + step + "): " + std::strerror(err));
  };
  int err = write_all(fd, text);
  if (err == 0 && ::fchmod(fd, mode) != 0) err = errno;
  if (err == 0 && ::fsync(fd) != 0) err = errno;
  if (::close(fd) != 0 && err == 0) err = errno;
  if (err != 0) throw fail("write", err);
  if (::rename(tmp.c_str(), path.c_str()) != 0) throw fail("rename", errno);
}

void append_to_file(const std::filesystem::path& path, std::string_view text, mode_t mode) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, mode);
  if (fd < 0) {
    const int err = errno;
    throw error::UserError("cannot append to " + path.string() + ": " +
                           (err == ELOOP ? std::string("it is a symbolic link, which is not followed; remove it")
                                         : std::string(std::strerror(err))));
  }
  const int err = write_all(fd, text);
  ::close(fd);
  if (err != 0) throw error::UserError("cannot append to " + path.string() + ": " + std::strerror(err));
}

}  // namespace meridian::daemon
