// The daemon's end of the control socket: a ZeroMQ REP socket on ipc://PATH through which
// `meridian status`, `peers`, `leave` and `roster` talk to it (requests and replies: control_protocol.h).
//
// Threading: one owning thread (the daemon's control thread) creates the server and calls serve() in
// its loop. The server creates no thread; it calls the handler on that thread. The socket file has mode
// 0600 (only the daemon's user may make it leave) from the moment anyone else could reach it, and is
// removed by the destructor. ZeroMQ stays inside control_server.cc: the server owns its own context.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "daemon/control/control_protocol.h"
#include "error/error.h"

namespace meridian::daemon {

// What the daemon plugs in. Called on the thread that calls serve(); an exception becomes an
// error reply (the daemon keeps running).
class ControlHandler {
 public:
  virtual ~ControlHandler() = default;
  virtual StatusReport status() = 0;
  virtual std::vector<PeerReport> peers() = 0;
  // Starts a graceful leave (announce, finish or abandon the round, checkpoint, exit) and returns at
  // once; the reply goes out before the daemon exits.
  virtual LeaveReport leave() = 0;
  // Every site of the federation as this site last heard of it, this site included.
  virtual std::vector<SiteRow> federation() { throw ControlProtocolError("this daemon has no federation view"); }
  // Lists or changes the running site's roster; throws error::UserError (the reply names the problem)
  // for a change it refuses, leaving the roster in force unchanged.
  virtual RosterReport roster(const RosterChange& change) {
    (void)change;
    throw ControlProtocolError("this daemon has no roster to change");
  }
};

class ControlServerError : public error::UserError {
 public:
  using error::UserError::UserError;
};

class ControlServer {
 public:
  // Binds ipc://`path`, creating its directory (mode 0700) if missing. A stale socket file left by a
  // killed daemon is replaced. Throws ControlServerError naming the path when its directory is not
  // private (another user's, or writable by group or others: daemon/files/private_directory.h), another
  // daemon is listening there, the path is too long for a Unix socket, or it cannot be bound or
  // restricted to mode 0600.
  // `handler` must outlive the server.
  ControlServer(std::string path, ControlHandler& handler);
  ControlServer(const ControlServer&) = delete;
  ControlServer& operator=(const ControlServer&) = delete;
  ~ControlServer();

  const std::string& path() const;

  // Waits up to `wait` for a request, then answers the requests waiting (at most `max_requests`, so a
  // flood cannot starve the caller's other work) and returns how many. A zero `wait` never blocks.
  // Throws error::InternalError for a broken socket.
  std::size_t serve(std::chrono::milliseconds wait, std::size_t max_requests = 16);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace meridian::daemon
