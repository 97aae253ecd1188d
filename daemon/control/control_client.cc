#include "daemon/control/control_client.h"

#include <zmq.hpp>

#include "daemon/control/unix_socket_probe.h"

namespace meridian::daemon {
namespace {

constexpr const char* kStartHint =
    "start one with 'meridian start --config FILE', or point at a running one with --socket PATH or "
    "--config FILE";

}  // namespace

struct ControlClient::Impl {
  zmq::context_t context{1};
};

ControlClient::ControlClient(std::string socket_path, std::chrono::milliseconds timeout)
    : path_(std::move(socket_path)), timeout_(timeout), impl_(std::make_unique<Impl>()) {}

ControlClient::~ControlClient() = default;

std::string ControlClient::exchange(const std::string& request) {
  std::string probe_error;
  switch (probe_unix_socket(path_, &probe_error)) {
    case UnixSocketState::kAbsent:
      throw NoDaemonError("no daemon is running at " + path_ + " (no control socket there); " + kStartHint);
    case UnixSocketState::kStale:
      throw NoDaemonError("no daemon is running at " + path_ +
                          " (the socket file is left from a daemon that stopped without cleaning up); " + kStartHint);
    case UnixSocketState::kNotSocket:
      throw NoDaemonError(path_ +
                          " is not a control socket; point at the daemon's with --socket PATH or --config FILE");
    case UnixSocketState::kError: throw NoDaemonError("cannot reach the daemon at " + path_ + ": " + probe_error);
    case UnixSocketState::kListening: break;
  }
  // A fresh REQ socket per request: after a timeout a REQ socket is stuck waiting for its reply.
  zmq::socket_t socket(impl_->context, zmq::socket_type::req);
  socket.set(zmq::sockopt::linger, 0);
  socket.set(zmq::sockopt::sndtimeo, static_cast<int>(timeout_.count()));
  socket.set(zmq::sockopt::rcvtimeo, static_cast<int>(timeout_.count()));
  socket.connect("ipc://" + path_);
  const auto no_reply = [&] {
    return NoDaemonError("the daemon at " + path_ + " did not answer within " + std::to_string(timeout_.count()) +
                         " ms (it may be busy or stuck; try again, or raise --timeout)");
  };
  if (!socket.send(zmq::buffer(request), zmq::send_flags::none)) throw no_reply();
  zmq::message_t reply;
  if (!socket.recv(reply, zmq::recv_flags::none)) throw no_reply();
  return reply.to_string();
}

StatusReport ControlClient::status() { return decode_status_reply(exchange(encode_request(ControlCommand::kStatus))); }
std::vector<PeerReport> ControlClient::peers() {
  return decode_peers_reply(exchange(encode_request(ControlCommand::kPeers)));
}
LeaveReport ControlClient::leave() { return decode_leave_reply(exchange(encode_request(ControlCommand::kLeave))); }
std::vector<SiteRow> ControlClient::federation() {
  return decode_federation_reply(exchange(encode_request(ControlCommand::kFederation)));
}
RosterReport ControlClient::roster(const RosterChange& change) {
  return decode_roster_reply(exchange(encode_roster_request(change)));
}

}  // namespace meridian::daemon
