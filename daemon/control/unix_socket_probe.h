// Whether something listens on a Unix socket path, asked with a plain connect(). ZeroMQ connects to an
// ipc:// endpoint lazily and would wait forever for a daemon that is not there; this tells a missing
// or stale socket file apart from a live daemon at once.
#pragma once

#include <string>

namespace meridian::daemon {

enum class UnixSocketState {
  kListening,  // a process accepts connections on it
  kAbsent,     // no file at the path
  kStale,      // a socket file nobody listens on (its daemon was killed)
  kNotSocket,  // the path exists but is not a socket
  kError,      // something else (permission denied, path too long); see `error`
};

// Never throws. `error` (optional) receives a description for kError.
UnixSocketState probe_unix_socket(const std::string& path, std::string* error = nullptr);

}  // namespace meridian::daemon
