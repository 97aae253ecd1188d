// Test helper: a federation member that turns hostile. It holds a rostered CurveZMQ key pair and
// speaks Meridian's wire protocol (peer/wire_codec.h) on a connection of its own to one site's
// listening socket, saying whatever a test wants: hellos with any name, address, terms or refusal,
// member lists with any records, heartbeats, leaves, data messages, or raw header frames. It also
// listens (a CURVE server with its own key) so that a site can answer it, and reads what arrives
// there as decoded headers; a site's header carries its model fingerprint, which the harness then
// stamps on what it sends (learn_fingerprint), so that its messages get past the fingerprint check to
// the checks a test aims at.
//
// What libzmq reports about the outgoing connection (handshake accepted or refused, connection
// closed) is read from its socket monitor, so a test can tell "refused at the handshake" from
// "connection cut".
//
// Thread-safety: none; one test thread owns a HostilePeer (its sockets are single-threaded).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include <zmq.hpp>

#include "peer/curve_keys.h"
#include "peer/membership_messages.h"
#include "peer/message.h"
#include "peer/wire_codec.h"
#include "peer/zmq/zmq_socket_monitor.h"
#include "tests/support/eventually.h"

namespace meridian::tests {

class HostilePeer {
 public:
  // What the outgoing connection's monitor reported so far.
  struct Events {
    int handshakes_ok = 0;      // CURVE handshakes the site accepted
    int handshakes_denied = 0;  // handshakes the site's ZAP handler refused (ZMQ_EVENT_HANDSHAKE_FAILED_AUTH)
    int closed = 0;             // connections that closed (by either side)
  };

  // Connects with `keys` to the site listening at `site_address` whose roster key is
  // `site_public_key`, and listens on a free loopback port (listen_address()) for answers.
  HostilePeer(peer::CurveKeyPair keys, const std::string& site_address, const std::string& site_public_key)
      : keys_(std::move(keys)), dealer_(ctx_, zmq::socket_type::dealer), router_(ctx_, zmq::socket_type::router) {
    router_.set(zmq::sockopt::linger, 0);
    router_.set(zmq::sockopt::curve_server, true);
    router_.set(zmq::sockopt::curve_secretkey, keys_.secret_key);
    router_.bind("tcp://127.0.0.1:*");
    listen_address_ = router_.get(zmq::sockopt::last_endpoint);
    dealer_.set(zmq::sockopt::linger, 0);
    dealer_.set(zmq::sockopt::curve_serverkey, site_public_key);
    dealer_.set(zmq::sockopt::curve_publickey, keys_.public_key);
    dealer_.set(zmq::sockopt::curve_secretkey, keys_.secret_key);
    monitor_.emplace(ctx_, dealer_,
                     ZMQ_EVENT_HANDSHAKE_SUCCEEDED | ZMQ_EVENT_HANDSHAKE_FAILED_AUTH | ZMQ_EVENT_DISCONNECTED);
    dealer_.connect(site_address);
  }
  ~HostilePeer() {
    monitor_.reset();  // before the socket it watches
    dealer_.close();
    router_.close();
  }
  HostilePeer(const HostilePeer&) = delete;
  HostilePeer& operator=(const HostilePeer&) = delete;

  const peer::CurveKeyPair& keys() const { return keys_; }
  // Where this harness accepts connections ("tcp://127.0.0.1:PORT"), for hellos that should be answered.
  const std::string& listen_address() const { return listen_address_; }

  // The connection's events so far (reads the monitor; never blocks).
  const Events& events() {
    for (const auto& e : monitor_->drain()) {
      if (e.kind == ZMQ_EVENT_HANDSHAKE_SUCCEEDED) ++events_.handshakes_ok;
      else if (e.kind == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH) ++events_.handshakes_denied;
      else if (e.kind == ZMQ_EVENT_DISCONNECTED) ++events_.closed;
    }
    return events_;
  }

  // The model fingerprint stamped on every message sent from now on (0 until set or learnt).
  void set_fingerprint(std::uint64_t fingerprint) { fingerprint_ = fingerprint; }
  std::uint64_t fingerprint() const { return fingerprint_; }

  // Sends one raw header frame, followed by `payload` as a second frame when given. Never blocks:
  // returns false when libzmq cannot take it (no connection left to queue it on, as after the site
  // refused the key), and then nothing was sent.
  bool send_raw(const std::string& header, std::optional<std::span<const float>> payload = std::nullopt) {
    if (!payload) return dealer_.send(zmq::buffer(header), zmq::send_flags::dontwait).has_value();
    if (!dealer_.send(zmq::buffer(header), zmq::send_flags::sndmore | zmq::send_flags::dontwait)) return false;
    // Once the first frame is taken libzmq takes the rest of the multipart message.
    (void)dealer_.send(zmq::const_buffer(payload->data(), payload->size_bytes()), zmq::send_flags::dontwait);
    return true;
  }

  // Sends `msg` as the wire codec encodes it (chunked as a site would), with this harness's
  // fingerprint; returns whether libzmq took every chunk (see send_raw).
  bool send(const peer::Message& msg) {
    const auto chunks = peer::encode_message(msg, fingerprint_, next_id_++, peer::WireLimits{});
    for (const auto& c : chunks) {
      const bool taken = c.elements == 0
                             ? send_raw(c.header)
                             : send_raw(c.header, std::span<const float>(msg.payload).subspan(c.offset, c.elements));
      if (!taken) return false;
    }
    return true;
  }
  bool send_hello(const peer::HelloInfo& hello) {
    return send(membership(peer::MessageKind::kHello, peer::encode_hello(hello)));
  }
  bool send_members(const peer::MemberListInfo& list) {
    return send(membership(peer::MessageKind::kMembers, peer::encode_members(list)));
  }
  bool send_heartbeat(const peer::HeartbeatInfo& hb) {
    return send(membership(peer::MessageKind::kHeartbeat, peer::encode_heartbeat(hb)));
  }
  bool send_leave(const peer::LeaveInfo& leave) {
    return send(membership(peer::MessageKind::kLeave, peer::encode_leave(leave)));
  }

  // The next header that arrived on the listening socket (a site's answer), or nullopt when none came
  // within `guard` (a hang guard, not a timing assertion). Headers that do not decode are skipped.
  std::optional<peer::WireHeader> receive(std::chrono::milliseconds guard = std::chrono::seconds(30)) {
    const auto deadline = std::chrono::steady_clock::now() + guard;
    while (std::chrono::steady_clock::now() < deadline) {
      zmq::message_t routing_id, header, extra;
      if (!router_.recv(routing_id, zmq::recv_flags::dontwait)) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
        continue;
      }
      std::optional<std::size_t> payload_bytes;
      if (routing_id.more()) (void)router_.recv(header, zmq::recv_flags::none);
      for (bool more = header.more(); more; more = extra.more()) {
        (void)router_.recv(extra, zmq::recv_flags::none);
        payload_bytes = extra.size();
      }
      auto decoded = peer::decode_header({static_cast<const std::byte*>(header.data()), header.size()}, payload_bytes,
                                         peer::WireLimits{});
      if (auto* h = std::get_if<peer::WireHeader>(&decoded)) return *h;
    }
    return std::nullopt;
  }

  // Learns the site's model fingerprint from its answer to a hello it must refuse (other federation
  // terms), without becoming a member: the site answers on a connection to listen_address().
  // Returns whether an answer came (within a hang guard); the fingerprint is then set.
  bool learn_fingerprint(const std::string& name) {
    peer::HelloInfo hello;
    hello.name = name;
    hello.listen_address = listen_address_;
    hello.incarnation = 1;
    hello.terms = {peer::Term{"hostile-peer", "differs from every site", "a term no site has"}};
    for (int attempt = 0; attempt < 20; ++attempt) {
      send_hello(hello);
      if (auto h = receive(std::chrono::seconds(3))) {
        fingerprint_ = h->model_fingerprint;
        return true;
      }
    }
    return false;
  }

 private:
  static peer::Message membership(peer::MessageKind kind, std::string body) {
    peer::Message m;
    m.kind = kind;
    m.body = std::move(body);
    return m;
  }

  peer::CurveKeyPair keys_;
  zmq::context_t ctx_{1};
  zmq::socket_t dealer_;
  zmq::socket_t router_;
  std::optional<peer::ZmqSocketMonitor> monitor_;
  std::string listen_address_;
  Events events_;
  std::uint64_t fingerprint_ = 0;
  std::uint64_t next_id_ = 1;
};

}  // namespace meridian::tests
