// Connection diagnostics from libzmq's socket monitors (peer/zmq/zmq_socket_monitor.h).
//
// A joining site learns why a bootstrap site does not answer from its own connection's events, at
// once instead of after --join-timeout: nobody listening (connection attempts retried), its key
// refused (the other site's ZAP handler denied it, which reaches this side as a failed CURVE
// handshake with the ZAP status code), security that differs (one side runs --insecure: the
// handshake's mechanisms differ, or the other side closes the connection during the handshake), or
// a connection closed during the CURVE handshake (the roster here may list an old key of that site). A secure site
// counts connections without CURVE as rejections, with the peer's host when it could still be read.
#include <spdlog/spdlog.h>

#include "peer/zmq/socket_peer_address.h"
#include "peer/zmq/zmq_io_loop.h"

namespace meridian::peer {

namespace {

constexpr int kBootstrapEvents = ZMQ_EVENT_CONNECTED | ZMQ_EVENT_CONNECT_RETRIED | ZMQ_EVENT_DISCONNECTED |
                                 ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                                 ZMQ_EVENT_HANDSHAKE_FAILED_AUTH | ZMQ_EVENT_HANDSHAKE_SUCCEEDED;
constexpr int kListenerEvents = ZMQ_EVENT_ACCEPTED | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL | ZMQ_EVENT_DISCONNECTED;
// Accepted connections whose host is remembered; past this, the oldest are forgotten.
constexpr std::size_t kMaxAccepted = 1024;

// The remote host of a connected socket (its address without the port, which changes with every
// reconnection); empty when it cannot be read (the connection is gone already).
std::string peer_host(int fd) {
  const auto address = socket_peer_address(fd);
  return address ? address->host : std::string();
}

}  // namespace

std::unique_ptr<ZmqSocketMonitor> ZmqTransport::IoLoop::watch(zmq::socket_t& dealer) {
  return std::make_unique<ZmqSocketMonitor>(ctx_, dealer, kBootstrapEvents);
}

void ZmqTransport::IoLoop::watch_listener() {
  listener_monitor_ = std::make_unique<ZmqSocketMonitor>(ctx_, router_, kListenerEvents);
}

void ZmqTransport::IoLoop::read_connection_events() {
  for (auto& b : bootstraps_) {
    if (!b.monitor) continue;
    const std::string before = b.problem;
    for (const auto& e : b.monitor->drain()) bootstrap_event(b, e);
    if (b.problem == before) continue;
    dirty_ = true;
    if (!b.problem.empty()) spdlog::warn("joining: {}", b.problem);
  }
  if (listener_monitor_)
    for (const auto& e : listener_monitor_->drain()) listener_event(e);
}

void ZmqTransport::IoLoop::bootstrap_event(Bootstrap& b, const ZmqSocketMonitor::Event& e) {
  const std::string& address = b.link.address;
  const std::string site = b.name.empty() ? address : b.name + " (" + address + ")";
  switch (e.kind) {
    case ZMQ_EVENT_CONNECT_RETRIED:
      // libzmq does not say why a connect failed; it retries every reconnect interval.
      if (!b.connected && b.problem.empty() && b.cut_handshakes == 0)
        b.problem = "no answer from " + site + " (cannot connect; retrying): is the site running and listening there?";
      break;
    case ZMQ_EVENT_CONNECTED:
      b.connected = true;
      b.handshake_ok = false;
      // The earlier attempts' diagnosis no longer holds; a failing handshake gives its own.
      if (b.problem.rfind("no answer", 0) == 0) b.problem.clear();
      break;
    case ZMQ_EVENT_HANDSHAKE_SUCCEEDED:
      b.handshake_ok = true;
      b.key_refused = false;
      b.cut_handshakes = 0;
      b.problem.clear();
      break;
    case ZMQ_EVENT_HANDSHAKE_FAILED_AUTH:
      b.key_refused = true;
      b.problem = site + " refused this site's key (CURVE handshake denied, ZAP status " + std::to_string(e.value) +
                  "): is this site's public key in that site's roster?";
      break;
    case ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL:
      if (e.value == ZMQ_PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH) {
        b.problem = secure() ? site +
                                   " does not use CurveZMQ (the handshake mechanisms differ): is that site "
                                   "started with --insecure?"
                             : site +
                                   " requires CurveZMQ and this site runs --insecure (the handshake "
                                   "mechanisms differ): start it with a key pair and the roster";
      } else {
        b.problem = "the handshake with " + site + " failed (ZMTP protocol error " + std::to_string(e.value) +
                    "): is the public key this site's roster lists for it that site's current key?";
      }
      break;
    case ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL:
    case ZMQ_EVENT_DISCONNECTED:
      // A CURVE server that cannot decrypt our hello (we hold an old public key of it) just closes, and
      // so, mostly, does a site that refuses our mechanism before its own greeting has reached us: the
      // mechanism mismatch above is seen only now and then. Both reach this side as a handshake failed
      // without detail, or only as the disconnection. One cut connection may be a race with a
      // diagnosis still to come; two in a row are the diagnosis.
      if (b.connected && !b.handshake_ok && e.kind == ZMQ_EVENT_DISCONNECTED) ++b.cut_handshakes;
      if (b.cut_handshakes >= 2 && b.problem.empty())
        b.problem = secure() ? site +
                                   " closed the connection during the CURVE handshake: is that site started with "
                                   "--insecure, or is the public key this site's roster lists for it not that "
                                   "site's current key?"
                             : site +
                                   " closed the connection during the handshake: it may require CurveZMQ, and "
                                   "this site runs --insecure";
      if (e.kind == ZMQ_EVENT_DISCONNECTED) b.connected = false;
      break;
    default: break;
  }
}

void ZmqTransport::IoLoop::listener_event(const ZmqSocketMonitor::Event& e) {
  switch (e.kind) {
    case ZMQ_EVENT_ACCEPTED: {
      // The address is read now: the later events name only the descriptor, or nothing.
      if (accepted_.size() >= kMaxAccepted) accepted_.erase(accepted_.begin());
      accepted_[e.value] = peer_host(e.value);
      break;
    }
    case ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL:
      // The failed connection's close follows; it names the descriptor, and so the address.
      if (e.value == ZMQ_PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH) plaintext_pending_ = true;
      break;
    case ZMQ_EVENT_DISCONNECTED: {
      incoming_.erase(e.value);
      std::string host;
      if (auto it = accepted_.find(e.value); it != accepted_.end()) {
        host = std::move(it->second);
        accepted_.erase(it);
      }
      if (!plaintext_pending_) break;
      plaintext_pending_ = false;
      reject(RejectCause::kPlaintext, host.empty() ? "(host unknown)" : host,
             "a connection without CURVE: this site accepts only CurveZMQ; is that site started with --insecure?");
      break;
    }
    default: break;
  }
}

}  // namespace meridian::peer
