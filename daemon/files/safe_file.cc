#include "daemon/files/safe_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>

#include "error/error.h"

namespace meridian::daemon {
namespace {

// Owns a POSIX file descriptor; fsync, fchmod and rename need one (std::ofstream exposes none).
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }
  // Closes now so that a failing close (which can report a delayed write error) is seen.
  int close() {
    const int fd = std::exchange(fd_, -1);
    return fd >= 0 ? ::close(fd) : 0;
  }

 private:
  int fd_;
};

}  // namespace

int write_all(int fd, const void* data, std::size_t size) {
  const auto* bytes = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::write(fd, bytes, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    bytes += n;
    size -= static_cast<std::size_t>(n);
  }
  return 0;
}

std::optional<ReplaceFailure> replace_file_with(const std::filesystem::path& path, mode_t mode, std::string_view what,
                                                const std::function<int(int fd)>& write) {
  const auto dir = path.has_parent_path() ? path.parent_path() : std::filesystem::path(".");
  const std::string named = (what.empty() ? std::string() : std::string(what) + " ") + path.string();
  // ".<name>.tmp-<pid>-<random>": the pid lets a later writer remove what a killed one left
  // (daemon/checkpoint/checkpoint_store.cc); mkostemp creates with O_CREAT | O_EXCL under a name nobody could predict.
  // Appended piece by piece: GCC 12 warns falsely (-Wrestrict) on a literal + std::string here.
  std::string leaf(".");
  leaf += path.filename().string();
  leaf += ".tmp-";
  leaf += std::to_string(::getpid());
  leaf += "-XXXXXX";
  std::string tmp = (dir / leaf).string();
  Fd fd(::mkostemp(tmp.data(), O_CLOEXEC));
  if (fd.get() < 0) {
    // Nothing was created, so there is nothing to remove; report the directory, the usual culprit.
    return ReplaceFailure{"cannot write " + named + ": cannot create a file in " + dir.string() + ": " +
                          std::strerror(errno)};
  }
  const auto fail = [&](const char* step, int err) {
    ::unlink(tmp.c_str());
    return ReplaceFailure{"cannot write " + named + ": " + step + ": " + std::strerror(err)};
  };
  if (const int err = write(fd.get())) return fail("write", err);
  if (::fchmod(fd.get(), mode) != 0) return fail("chmod", errno);
  // fsync before rename: otherwise a crash can leave the new name pointing at an empty file.
  if (::fsync(fd.get()) != 0) return fail("fsync", errno);
  if (fd.close() != 0) return fail("close", errno);
  if (::rename(tmp.c_str(), path.c_str()) != 0) return fail("rename", errno);
  // fsync the directory so that the rename itself survives a crash.
  Fd dir_fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir_fd.get() < 0 || ::fsync(dir_fd.get()) != 0)
    return ReplaceFailure{named + " written but its directory could not be synced: " + std::strerror(errno), true};
  return std::nullopt;
}

void replace_file(const std::filesystem::path& path, std::string_view text, mode_t mode) {
  const auto failure =
      replace_file_with(path, mode, "", [&](int fd) { return write_all(fd, text.data(), text.size()); });
  // A directory that cannot be synced leaves the new contents in place, durable once the system
  // writes its metadata back: as good as this writer ever was for these small files.
  if (failure && !failure->replaced) throw error::UserError(failure->message);
}

void append_to_file(const std::filesystem::path& path, std::string_view text, mode_t mode) {
  Fd fd(::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, mode));
  if (fd.get() < 0) {
    const int err = errno;
    throw error::UserError("cannot append to " + path.string() + ": " +
                           (err == ELOOP ? std::string("it is a symbolic link, which is not followed; remove it")
                                         : std::string(std::strerror(err))));
  }
  int err = write_all(fd.get(), text.data(), text.size());
  if (fd.close() != 0 && err == 0) err = errno;
  if (err != 0) throw error::UserError("cannot append to " + path.string() + ": " + std::strerror(err));
}

}  // namespace meridian::daemon
