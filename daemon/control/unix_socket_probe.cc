#include "daemon/control/unix_socket_probe.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace meridian::daemon {

UnixSocketState probe_unix_socket(const std::string& path, std::string* error) {
  auto fail = [&](const std::string& what) {
    if (error) *error = what;
    return UnixSocketState::kError;
  };
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT || errno == ENOTDIR) return UnixSocketState::kAbsent;
    return fail(std::strerror(errno));
  }
  if (!S_ISSOCK(st.st_mode)) return UnixSocketState::kNotSocket;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof addr.sun_path) {
    return fail("path longer than a Unix socket allows (" + std::to_string(sizeof addr.sun_path - 1) + " bytes)");
  }
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return fail(std::strerror(errno));
  const int rc = ::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr);
  const int err = errno;
  ::close(fd);
  if (rc == 0) return UnixSocketState::kListening;
  if (err == ECONNREFUSED) return UnixSocketState::kStale;
  if (err == ENOENT) return UnixSocketState::kAbsent;
  return fail(std::strerror(err));
}

}  // namespace meridian::daemon
