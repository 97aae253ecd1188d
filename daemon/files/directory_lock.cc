#include "daemon/files/directory_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "daemon/files/private_directory.h"

namespace meridian::daemon {

DirectoryLock DirectoryLock::acquire(const std::filesystem::path& dir) {
  make_private_directory(dir, "directory");
  const auto file = dir / ".meridian.lock";
  // Opened in place, not created under a temporary name and renamed: the lock is the file's inode, so
  // every daemon must open the same one. O_NOFOLLOW refuses a link planted there; the checks below
  // refuse a hard link or a file of another user's.
  const int fd = ::open(file.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) {
    const int err = errno;
    throw DirectoryLockError("cannot open lock file " + file.string() + ": " +
                             (err == ELOOP ? std::string("it is a symbolic link, which is not followed; remove it")
                                           : std::string(std::strerror(err))));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_nlink != 1 || st.st_uid != ::geteuid()) {
    ::close(fd);
    throw DirectoryLockError("lock file " + file.string() +
                             " is not a plain file of this user's with one name (a link or another user's file); "
                             "remove it");
  }
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
