#include "daemon/control_server.h"

#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <filesystem>

#include "daemon/unix_socket_probe.h"

namespace meridian::daemon {
namespace {

// Requests are a few dozen bytes; anything big is not from `meridian` and is dropped by ZeroMQ.
constexpr std::int64_t kMaxRequestBytes = 64 * 1024;

}  // namespace

ControlServer::ControlServer(zmq::context_t& context, std::string path, ControlHandler& handler)
    : path_(std::move(path)), handler_(handler), socket_(context, zmq::socket_type::rep) {
  if (path_.size() >= sizeof(sockaddr_un::sun_path)) {
    throw ControlServerError("control socket " + path_ + ": path is longer than a Unix socket allows (" +
                             std::to_string(sizeof(sockaddr_un::sun_path) - 1) +
                             " bytes); choose a shorter --control-socket or --run-dir");
  }
  const std::filesystem::path parent = std::filesystem::path(path_).parent_path();
  if (!parent.empty()) {
    std::error_code ec;
    if (std::filesystem::create_directories(parent, ec)) {
      std::filesystem::permissions(parent, std::filesystem::perms::owner_all, ec);
    }
    if (ec)
      throw ControlServerError("control socket " + path_ + ": cannot create " + parent.string() + ": " + ec.message());
  }
  std::string probe_error;
  switch (probe_unix_socket(path_, &probe_error)) {
    case UnixSocketState::kListening:
      throw ControlServerError("control socket " + path_ +
                               " is in use by a running daemon; stop it first ('meridian leave') or give this one "
                               "another --run-dir or --control-socket");
    case UnixSocketState::kNotSocket:
      throw ControlServerError("control socket " + path_ +
                               ": the path exists and is not a socket; remove it or "
                               "choose another --control-socket");
    case UnixSocketState::kStale:
      ::unlink(path_.c_str());  // left by a daemon that was killed; binding over it is what we want
      break;
    case UnixSocketState::kError: throw ControlServerError("control socket " + path_ + ": " + probe_error);
    case UnixSocketState::kAbsent: break;
  }
  // A short linger: the reply to `leave` must still go out when the daemon closes the socket right
  // after, but shutdown must not wait long for a client that went away.
  socket_.set(zmq::sockopt::linger, 500);
  socket_.set(zmq::sockopt::maxmsgsize, kMaxRequestBytes);
  try {
    socket_.bind("ipc://" + path_);
  } catch (const zmq::error_t& e) {
    throw ControlServerError("control socket " + path_ + ": cannot bind: " + e.what());
  }
  // bind creates the file with the process umask; leave stops the site, so only the daemon's user may
  // connect. (Changing the umask around bind would affect every thread's files, so chmod afterwards.)
  ::chmod(path_.c_str(), 0600);
}

ControlServer::~ControlServer() {
  socket_.close();
  ::unlink(path_.c_str());
}

std::size_t ControlServer::serve_pending(std::size_t max_requests) {
  std::size_t served = 0;
  while (served < max_requests) {
    zmq::message_t request;
    if (!socket_.recv(request, zmq::recv_flags::dontwait)) break;
    const std::string reply = answer(request.to_string());
    // A REP socket must answer before it can receive again; if the client is gone the reply is dropped.
    (void)socket_.send(zmq::buffer(reply), zmq::send_flags::dontwait);
    ++served;
  }
  return served;
}

std::string ControlServer::answer(const std::string& request) {
  try {
    const auto decoded = decode_control_request(request);
    switch (decoded.command) {
      case ControlCommand::kStatus: return encode_status_reply(handler_.status());
      case ControlCommand::kPeers: return encode_peers_reply(handler_.peers());
      case ControlCommand::kLeave: return encode_leave_reply(handler_.leave());
      case ControlCommand::kFederation: return encode_federation_reply(handler_.federation());
      case ControlCommand::kRoster: return encode_roster_reply(handler_.roster(decoded.roster));
    }
  } catch (const ControlProtocolError& e) {
    return encode_error_reply(std::string("bad request: ") + e.what());
  } catch (const error::UserError& e) {
    return encode_error_reply(e.what());  // a request refused for a reason of its own (a roster change)
  } catch (const std::exception& e) {
    return encode_error_reply(std::string("the daemon could not answer: ") + e.what());
  }
  return encode_error_reply("unreachable");
}

}  // namespace meridian::daemon
