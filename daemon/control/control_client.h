// The command side of the control socket: asks a running daemon for its status, its peers, its view of
// the federation, to change its roster, or to leave. One request per call, each with a deadline.
//
// Thread-safety: one thread per client. Owns its own ZeroMQ context.
#pragma once

#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "daemon/control/control_protocol.h"
#include "error/error.h"

namespace meridian::daemon {

// No daemon answers at the socket path; what() says why (no file, stale file, no reply) and how to
// start or find one.
class NoDaemonError : public error::UserError {
 public:
  using error::UserError::UserError;
};

class ControlClient {
 public:
  explicit ControlClient(std::string socket_path, std::chrono::milliseconds timeout = std::chrono::milliseconds(5000));
  ~ControlClient();
  ControlClient(const ControlClient&) = delete;
  ControlClient& operator=(const ControlClient&) = delete;

  // Each throws NoDaemonError when nothing answers within the timeout, error::UserError when the daemon
  // refuses the request (its reason in the message), and ControlProtocolError when the reply is
  // unreadable.
  StatusReport status();
  std::vector<PeerReport> peers();
  LeaveReport leave();
  std::vector<SiteRow> federation();
  RosterReport roster(const RosterChange& change);

  // One raw request/reply exchange (the reply text is returned unparsed).
  std::string exchange(const std::string& request);

 private:
  struct Impl;
  std::string path_;
  std::chrono::milliseconds timeout_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace meridian::daemon
