// Receiving in the ZeroMQ transport: read one message's frames from the ROUTER, name its sender (the
// roster entry of its CURVE key, or in insecure mode the hello of its connection), decode and
// validate the header, count it, and hand it on: membership kinds to the membership driver, control
// messages to the control inbox, mixer messages to reassembly and the sink (zmq_sink_forward.cc).
// Every refused message is counted by cause and never reaches the caller. A hello whose federation
// terms differ from ours is answered with a refusal (peer/federation_terms.h).
#include <sys/socket.h>

#include <algorithm>

#include <spdlog/spdlog.h>

#include "peer/printable_text.h"
#include "peer/zmq/socket_peer_address.h"
#include "peer/zmq/zmq_io_loop.h"

namespace meridian::peer {

namespace {

std::string hex_id(const zmq::message_t& m) {
  static const char* digits = "0123456789abcdef";
  std::string out = "connection ";
  const auto* p = static_cast<const unsigned char*>(m.data());
  for (std::size_t i = 0; i < m.size() && i < 8; ++i) {
    out += digits[p[i] >> 4];
    out += digits[p[i] & 15];
  }
  return out;
}

// The remote end of a connected socket as "ip:port" (which tells one connection from a later one
// that reuses its descriptor), or empty when it cannot be read (closed already).
std::string remote_end(int fd) {
  const auto address = socket_peer_address(fd);
  return address ? address->endpoint() : std::string();
}

// Accepted connections whose key is remembered; past this the lowest descriptors are forgotten (a
// stale one among them is still refused message by message, and cut when it next speaks).
constexpr std::size_t kMaxIncoming = 4096;

}  // namespace

const Roster::Entry* ZmqTransport::IoLoop::sender_of(const zmq::message_t& header, const char* key) {
  // libzmq's source descriptor of a received message (ZMQ_SRCFD; -1 when it has none).
  const int fd = zmq_msg_get(header.handle(), ZMQ_SRCFD);
  if (fd >= 0) {
    auto it = incoming_.find(fd);
    if (it == incoming_.end() || it->second.key != key) {
      if (it == incoming_.end() && incoming_.size() >= kMaxIncoming) incoming_.erase(incoming_.begin());
      incoming_[fd] = Incoming{key, remote_end(fd)};
    }
  }
  const auto* entry = opt_.roster->by_key(key);
  if (!entry && fd >= 0) cut_stale_connections();
  return entry;
}

void ZmqTransport::IoLoop::cut_stale_connections() {
  for (auto it = incoming_.begin(); it != incoming_.end();) {
    if (opt_.roster->by_key(it->second.key)) {
      ++it;
      continue;
    }
    // Only the connection noted: a descriptor libzmq closed and reused since has another remote end.
    const std::string now_at = remote_end(it->first);
    if (!now_at.empty() && now_at == it->second.peer) {
      spdlog::info("'{}': closing the connection from {}: its key {} is no longer in the roster", opt_.name,
                   now_at, it->second.key);
      ::shutdown(it->first, SHUT_RDWR);
    }
    it = incoming_.erase(it);
  }
}

void ZmqTransport::IoLoop::reject(RejectCause cause, const std::string& peer, const std::string& detail) {
  t_.rejections_.record(cause, peer, detail);
}

void ZmqTransport::IoLoop::refuse(const std::string& name, const HelloInfo& hello, const TermsMismatch& mismatch) {
  reject(RejectCause::kTerms, name, refusal_log_detail(name, mismatch));
  const std::string& address = dial_address(name, hello.listen_address);
  if (address.empty() || (secure() && !opt_.roster->by_name(name))) return;
  // The refused site's own listening address carries the answer: it reads nothing on the connection
  // it greeted us on. A hostile sender in insecure mode could make up names; a few connections at most.
  constexpr std::size_t kMaxRefusalLinks = 16;
  auto it = refusal_links_.find(name);
  if (it != refusal_links_.end() && it->second.address != address) {
    refusal_links_.erase(it);
    it = refusal_links_.end();
  }
  if (it == refusal_links_.end()) {
    if (refusal_links_.size() >= kMaxRefusalLinks) refusal_links_.clear();
    auto dealer = open_dealer(address, name);
    if (!dealer) return;
    it = refusal_links_.emplace(name, Link{address, std::move(*dealer), {}, false}).first;
  }
  HelloInfo answer = membership().hello();
  answer.refusal = refusal_reason(opt_.name, mismatch);
  // One refusal waiting per link is enough: the refused site greets again every heartbeat.
  if (it->second.queue.empty())
    enqueue_membership(it->second, name, MessageKind::kHello, encode_hello(answer), Clock::now());
}

void ZmqTransport::IoLoop::refused_by(const std::string& from, const std::string& reason) {
  // Only a site this one joins through decides that it is not admitted: any other member could say
  // so of anyone. (Insecure mode authenticates no name, so there any refusal stands.)
  if (secure() &&
      std::none_of(bootstraps_.begin(), bootstraps_.end(), [&](const Bootstrap& b) { return b.name == from; })) {
    reject(RejectCause::kStrayRefusal, from, "refuses this site, which does not join through it");
    return;
  }
  std::lock_guard lock(t_.mu_);
  if (t_.refusal_) return;
  t_.refusal_ = printable_text(reason, kMaxPeerTextBytes);
  spdlog::error("'{}': {}", opt_.name, *t_.refusal_);
}

bool ZmqTransport::IoLoop::receive_one() {
  try {
    if (!router_.recv(rid_, zmq::recv_flags::dontwait)) return false;
  } catch (const zmq::error_t& e) {
    if (e.num() == EINTR) return false;  // interrupted by a signal: the loop polls again
    throw;
  }
  const auto now = Clock::now();
  // Every rejection drops the message and reports that one was consumed.
  auto drop = [this](RejectCause cause, const std::string& peer, const std::string& detail) {
    reject(cause, peer, detail);
    return true;
  };
  const char* user_id = nullptr;
  std::string label;
  if (!rid_.more()) {
    reject(RejectCause::kTruncated, hex_id(rid_), "a message without a header frame");
    return true;
  }
  (void)router_.recv(hdr_);
  std::optional<std::size_t> payload_bytes;
  bool extra = false;
  if (hdr_.more()) {
    (void)router_.recv(pay_);
    payload_bytes = pay_.size();
    bool more = pay_.more();
    while (more) {
      (void)router_.recv(extra_);
      more = extra_.more();
      extra = true;
    }
  }
  // Who sent it: the roster entry of the connection's key (secure) or the hello of this connection
  // (insecure).
  std::string name;
  if (secure()) {
    // The key the connection authenticated with (the ZAP handler's User-Id), checked against the roster
    // in force for every message: a connection admitted before the operator removed or replaced its key
    // stays open in libzmq, so everything on it is refused here, and the connection is cut.
    user_id = zmq_msg_gets(hdr_.handle(), "User-Id");
    if (!user_id)
      return drop(RejectCause::kUnknownSender, hex_id(rid_), "connection has no authenticated key");
    const auto* entry = sender_of(hdr_, user_id);
    if (!entry)
      return drop(RejectCause::kStaleKey, std::string("key ") + user_id,
                  "its key is no longer in the roster (removed, or replaced by a new key)");
    name = entry->name;
    label = name;
  } else {
    auto it = connection_names_.find(rid_.to_string());
    label = it != connection_names_.end() ? it->second : hex_id(rid_);
  }
  if (extra) return drop(RejectCause::kMalformed, label, "more than two frames after the routing id");

  auto decoded = decode_header({static_cast<const std::byte*>(hdr_.data()), hdr_.size()}, payload_bytes, opt_.limits);
  if (auto* r = std::get_if<Rejection>(&decoded)) return drop(r->cause, label, r->detail);
  const WireHeader& h = std::get<WireHeader>(decoded);

  std::optional<HelloInfo> hello;
  if (h.kind == MessageKind::kHello) {
    auto decoded_hello = decode_hello(h.body);
    if (auto* r = std::get_if<Rejection>(&decoded_hello)) return drop(r->cause, label, r->detail);
    hello = std::move(std::get<HelloInfo>(decoded_hello));
  }
  if (secure()) {
    if (hello && hello->name != name)
      return drop(RejectCause::kUnknownSender, label, "hello claims the name '" + hello->name + "'");
  } else if (hello) {
    name = hello->name;
    connection_names_[rid_.to_string()] = name;
  } else {
    auto it = connection_names_.find(rid_.to_string());
    if (it == connection_names_.end())
      return drop(RejectCause::kUnknownSender, label, "message before any hello on this connection");
    name = it->second;
  }
  if (name == opt_.name) return drop(RejectCause::kUnknownSender, label, "a peer uses this site's own name");

  // Terms come before the header's model fingerprint: a site with another model hears which model
  // differs, not a hash. Only an authenticated sender gets here (secure mode: its roster key).
  if (hello && !hello->refusal.empty()) {
    refused_by(name, hello->refusal);
    return true;
  }
  if (hello && !opt_.terms.empty()) {
    if (auto mismatch = compare_terms(opt_.terms, hello->terms)) {
      refuse(name, *hello, *mismatch);
      return true;
    }
  }

  if (auto r = validator_.check(name, h)) return drop(r->cause, name, r->detail);

  stats_.bytes_received += hdr_.size() + (payload_bytes ? *payload_bytes : 0);
  traffic_[name].in += hdr_.size() + (payload_bytes ? *payload_bytes : 0);
  dirty_ = true;
  switch (h.kind) {
    case MessageKind::kHello:
      if (auto r = driver_->on_hello(*hello, now)) return drop(r->cause, name, r->detail);
      break;
    case MessageKind::kMembers:
    case MessageKind::kHeartbeat:
    case MessageKind::kLeave:
      if (auto r = driver_->on_message(name, h.kind, h.body, now)) return drop(r->cause, name, r->detail);
      break;
    case MessageKind::kControl: {
      if (auto r = driver_->admit(name, h.kind, now)) return drop(r->cause, name, r->detail);
      Message m = h.to_message();
      m.from = name;
      deliver(std::move(m));
      break;
    }
    case MessageKind::kPushSum:
    case MessageKind::kReduceChunk:
    case MessageKind::kGroupChunk:
    case MessageKind::kCompressedShare:
      if (auto r = driver_->admit(name, h.kind, now)) return drop(r->cause, name, r->detail);
      receive_mixer(name, h, payload_bytes ? *payload_bytes : 0);
      return true;
  }
  ++stats_.messages_received;
  return true;
}

}  // namespace meridian::peer
