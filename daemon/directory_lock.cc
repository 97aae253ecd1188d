#include "daemon/directory_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace meridian::daemon {

DirectoryLock DirectoryLock::acquire(const std::filesystem::path& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw DirectoryLockError("cannot use directory " + dir.string() + ": " + ec.message());
  const auto file = dir / ".meridian.lock";
  const int fd = ::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) throw DirectoryLockError("cannot create lock file " + file.string() + ": " + std::strerror(errno));
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    // The holder wrote its pid into the file; it is only for the message.
    char pid[32] = {};
    const ssize_t n = ::pread(fd, pid, sizeof pid - 1, 0);
    ::close(fd);
    if (err == EWOULDBLOCK) {
      throw DirectoryLockError("directory " + dir.string() + " is in use by another daemon" +
                               (n > 0 ? std::string(" (pid ") + pid + ")" : std::string()) +
                               "; give each site its own --run-dir / --checkpoint-dir");
    }
    throw DirectoryLockError("cannot lock " + file.string() + ": " + std::strerror(err));
  }
  const std::string me = std::to_string(::getpid());
  if (::ftruncate(fd, 0) == 0) (void)!::pwrite(fd, me.data(), me.size(), 0);
  return DirectoryLock(dir, fd);
}

DirectoryLock::DirectoryLock(DirectoryLock&& other) noexcept
    : dir_(std::move(other.dir_)), fd_(std::exchange(other.fd_, -1)) {}

DirectoryLock& DirectoryLock::operator=(DirectoryLock&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    dir_ = std::move(other.dir_);
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

DirectoryLock::~DirectoryLock() {
  if (fd_ >= 0) ::close(fd_);  // closing the last descriptor releases the flock
}

}  // namespace meridian::daemon
