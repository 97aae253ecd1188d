// The model-sized buffers a site shares with its attached trainer (daemon/attached/attached_trainer.h): one
// anonymous memory file (memfd) of float32 values, mapped here and, once its descriptor has crossed
// the trainer channel (SCM_RIGHTS), in the trainer's process too. Nothing else names it, so no stale
// segment outlives the two processes, and no other user can open it.
//
// The size is sealed (F_SEAL_SHRINK, F_SEAL_GROW) before the descriptor leaves the daemon: a trainer
// cannot truncate the file under the daemon's mapping, which would kill the daemon with SIGBUS on its
// next read. The contents are the trainer's to write; the daemon checks what it reads (finite values)
// before it mixes it.
//
// Ownership: move-only owner of the descriptor and the mapping. Thread-safety: none; the trainer
// thread uses it, while the trainer process writes only when the channel's protocol lets it.
#pragma once

#include <cstddef>
#include <span>
#include <string>

#include "error/error.h"

namespace meridian::daemon {

class SharedSegmentError : public error::UserError {
 public:
  using error::UserError::UserError;
};

class SharedSegment {
 public:
  // A zeroed segment of `floats` float32 values named `name` (in /proc, for people). Throws
  // SharedSegmentError naming the size and the system's reason when it cannot be made, or when
  // `floats` bytes overflow.
  static SharedSegment create(const std::string& name, std::size_t floats);

  SharedSegment(SharedSegment&& other) noexcept;
  SharedSegment& operator=(SharedSegment&& other) noexcept;
  SharedSegment(const SharedSegment&) = delete;
  SharedSegment& operator=(const SharedSegment&) = delete;
  ~SharedSegment();

  // The descriptor to pass to the trainer (stays owned here).
  int fd() const { return fd_; }
  std::span<float> floats() { return {data_, floats_}; }
  std::span<const float> floats() const { return {data_, floats_}; }
  std::size_t bytes() const { return floats_ * sizeof(float); }

 private:
  SharedSegment(int fd, float* data, std::size_t floats) : fd_(fd), data_(data), floats_(floats) {}
  void release() noexcept;

  int fd_ = -1;
  float* data_ = nullptr;
  std::size_t floats_ = 0;
};

}  // namespace meridian::daemon
