#include "daemon/attached/shared_segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <limits>
#include <utility>

namespace meridian::daemon {

SharedSegment SharedSegment::create(const std::string& name, std::size_t floats) {
  const auto fail = [&](const std::string& what, int err) {
    return SharedSegmentError("shared segment of " + std::to_string(floats) + " float32 values: " + what +
                              (err != 0 ? std::string(": ") + std::strerror(err) : std::string()));
  };
  if (floats == 0) throw fail("a model without parameters has nothing to share", 0);
  if (floats > static_cast<std::size_t>(std::numeric_limits<off_t>::max()) / sizeof(float))
    throw fail("too large", 0);
  const int fd = ::memfd_create(name.c_str(), MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) throw fail("memfd_create failed", errno);
  const std::size_t bytes = floats * sizeof(float);
  if (::ftruncate(fd, static_cast<off_t>(bytes)) != 0 ||
      ::fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    const int err = errno;
    ::close(fd);
    throw fail("cannot size and seal it", err);
  }
  void* mapped = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (mapped == MAP_FAILED) {
    const int err = errno;
    ::close(fd);
    throw fail("cannot map it", err);
  }
  return SharedSegment(fd, static_cast<float*>(mapped), floats);
}

SharedSegment::SharedSegment(SharedSegment&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)),
      data_(std::exchange(other.data_, nullptr)),
      floats_(std::exchange(other.floats_, 0)) {}

SharedSegment& SharedSegment::operator=(SharedSegment&& other) noexcept {
  if (this != &other) {
    release();
    fd_ = std::exchange(other.fd_, -1);
    data_ = std::exchange(other.data_, nullptr);
    floats_ = std::exchange(other.floats_, 0);
  }
  return *this;
}

SharedSegment::~SharedSegment() { release(); }

void SharedSegment::release() noexcept {
  if (data_ != nullptr) ::munmap(data_, floats_ * sizeof(float));
  if (fd_ >= 0) ::close(fd_);
  data_ = nullptr;
  fd_ = -1;
  floats_ = 0;
}

}  // namespace meridian::daemon
