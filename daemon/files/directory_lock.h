// Exclusive ownership of a directory by one daemon (its run or checkpoint directory), so that two
// daemons configured with the same directory cannot rotate away each other's checkpoints. A lock file
// DIR/.meridian.lock is held with flock(2): the kernel releases it when the process dies, so a daemon
// killed with SIGKILL never leaves a stale lock behind.
#pragma once

#include <filesystem>
#include <string>

#include "error/error.h"

namespace meridian::daemon {

// The directory is taken by another daemon, or cannot be used; what() names it (and the holder's pid
// when known) and what to do.
class DirectoryLockError : public error::UserError {
 public:
  using error::UserError::UserError;
};

class DirectoryLock {
 public:
  // Creates `dir` if missing (mode 0700) and takes its lock without waiting. Throws
  // PrivateDirectoryError when another user owns `dir` or its group or others can write it
  // (daemon/files/private_directory.h); DirectoryLockError when another process (or another DirectoryLock in
  // this one) holds it, the lock file is a link or another user's, or the directory cannot be used.
  static DirectoryLock acquire(const std::filesystem::path& dir);

  DirectoryLock(DirectoryLock&& other) noexcept;
  DirectoryLock& operator=(DirectoryLock&& other) noexcept;
  DirectoryLock(const DirectoryLock&) = delete;
  DirectoryLock& operator=(const DirectoryLock&) = delete;
  // Releases the lock (the lock file stays; it is harmless and reused).
  ~DirectoryLock();

  const std::filesystem::path& dir() const { return dir_; }

 private:
  DirectoryLock(std::filesystem::path dir, int fd) : dir_(std::move(dir)), fd_(fd) {}
  std::filesystem::path dir_;
  int fd_ = -1;
};

}  // namespace meridian::daemon
