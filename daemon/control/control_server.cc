#include "daemon/control/control_server.h"

#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <zmq.hpp>

#include "daemon/files/private_directory.h"
#include "daemon/control/unix_socket_probe.h"

namespace meridian::daemon {
namespace {

// Requests are a few dozen bytes; anything big is not from `meridian` and is dropped by ZeroMQ.
constexpr std::int64_t kMaxRequestBytes = 64 * 1024;

}  // namespace

struct ControlServer::Impl {
  Impl(std::string path, ControlHandler& handler)
      : path_(std::move(path)), handler_(handler), context_(1), socket_(context_, zmq::socket_type::rep) {}
  void bind(const std::filesystem::path& parent);
  void bind_private(const std::filesystem::path& parent);
  std::string answer(const std::string& request);

  std::string path_;
  ControlHandler& handler_;
  // Its own context: the one thread that owns the server owns the socket, and closing both on
  // destruction (the socket first) cannot wait on anyone else's sockets.
  zmq::context_t context_;
  zmq::socket_t socket_;
};

ControlServer::ControlServer(std::string path, ControlHandler& handler)
    : impl_(std::make_unique<Impl>(std::move(path), handler)) {
  std::filesystem::path parent = std::filesystem::path(impl_->path_).parent_path();
  if (parent.empty()) parent = ".";
  impl_->bind(parent);
}

const std::string& ControlServer::path() const { return impl_->path_; }

void ControlServer::Impl::bind(const std::filesystem::path& parent) {
  if (path_.size() >= sizeof(sockaddr_un::sun_path)) {
    throw ControlServerError("control socket " + path_ + ": path is longer than a Unix socket allows (" +
                             std::to_string(sizeof(sockaddr_un::sun_path) - 1) +
                             " bytes); choose a shorter --control-socket or --run-dir");
  }
  try {
    make_private_directory(parent, "control socket directory");
  } catch (const PrivateDirectoryError& e) {
    throw ControlServerError("control socket " + path_ + ": " + e.what());
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
  bind_private(parent);
}

void ControlServer::Impl::bind_private(const std::filesystem::path& parent) {
  const auto fail = [&](const std::string& what) {
    return ControlServerError("control socket " + path_ + ": " + what);
  };
  // `leave` stops the site, so only the daemon's user may connect. bind creates the socket file with
  // the process umask (changing the umask would affect every thread's files), so the socket is bound
  // inside a new directory of mode 0700, where nobody else can reach it, restricted to 0600 there, and
  // only then renamed into place.
  std::string staging = (parent / ".ctl-XXXXXX").string();
  const bool staged = staging.size() + 2 < sizeof(sockaddr_un::sun_path) && ::mkdtemp(staging.data()) != nullptr;
  // Without room for the staging name, bind in place: the directory is private already (checked above),
  // and only a directory that others may enter leaves them the moment before the chmod.
  const std::string bound = staged ? staging + "/s" : path_;
  const auto discard = [&] {
    if (!staged) return;
    ::unlink(bound.c_str());
    ::rmdir(staging.c_str());
  };
  try {
    socket_.bind("ipc://" + bound);
  } catch (const zmq::error_t& e) {
    discard();
    throw fail(std::string("cannot bind: ") + e.what());
  }
  if (::chmod(bound.c_str(), 0600) != 0) {
    const int err = errno;
    discard();
    throw fail(std::string("cannot restrict it to this user (chmod 600): ") + std::strerror(err));
  }
  if (staged) {
    if (::rename(bound.c_str(), path_.c_str()) != 0) {
      const int err = errno;
      discard();
      throw fail(std::string("cannot move it into place: ") + std::strerror(err));
    }
    ::rmdir(staging.c_str());
  }
}

ControlServer::~ControlServer() {
  impl_->socket_.close();
  ::unlink(impl_->path_.c_str());
}

std::size_t ControlServer::serve(std::chrono::milliseconds wait, std::size_t max_requests) {
  Impl& d = *impl_;
  std::size_t served = 0;
  try {
    if (wait.count() > 0) {
      zmq::pollitem_t item{d.socket_.handle(), 0, ZMQ_POLLIN, 0};
      zmq::poll(&item, 1, wait);
      if (!(item.revents & ZMQ_POLLIN)) return 0;
    }
    while (served < max_requests) {
      zmq::message_t request;
      if (!d.socket_.recv(request, zmq::recv_flags::dontwait)) break;
      const std::string reply = d.answer(request.to_string());
      // A REP socket must answer before it can receive again; if the client is gone the reply is dropped.
      (void)d.socket_.send(zmq::buffer(reply), zmq::send_flags::dontwait);
      ++served;
    }
  } catch (const zmq::error_t& e) {
    // The daemon's own socket on its own context: nothing a client sends breaks it.
    throw error::InternalError("control socket " + d.path_ + ": " + e.what());
  }
  return served;
}

std::string ControlServer::Impl::answer(const std::string& request) {
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
