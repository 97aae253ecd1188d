#include "peer/zmq_transport.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>

#include <spdlog/spdlog.h>
#include <zmq.hpp>

#include "peer/link_emulator.h"
#include "peer/membership.h"
#include "peer/reassembler.h"
#include "peer/zap_handler.h"

namespace meridian::peer {

namespace {

using Clock = std::chrono::steady_clock;

// A sent payload shared by the zero-copy frames of its chunks. libzmq calls release_payload() from its
// own I/O thread when it is done with a frame; the last one hands the buffer back to the pool. The
// holder's lifetime is managed by this reference count because libzmq's C callback is the only
// owner that knows when the bytes are gone.
struct SentPayload {
  SentPayload(std::vector<float> d, BufferPool* p, std::size_t r) : data(std::move(d)), pool(p), refs(r) {}
  std::vector<float> data;
  BufferPool* pool;
  std::atomic<std::size_t> refs;
};

void release_payload(void* /*data*/, void* hint) {
  auto* holder = static_cast<SentPayload*>(hint);
  if (holder->refs.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  std::unique_ptr<SentPayload> owned(holder);
  owned->pool->give(std::move(owned->data));
}

struct Outgoing {
  Clock::time_point due;
  zmq::message_t header;
  zmq::message_t payload;
  bool has_payload = false;
  bool last_chunk = true;
  std::size_t bytes = 0;
};

struct Link {
  std::string address;
  zmq::socket_t dealer;
  std::deque<Outgoing> queue;
  bool blocked = false;  // libzmq's queue for this peer is full; poll for POLLOUT
};

struct Bootstrap {
  std::string name;  // empty when only the address is known (insecure mode)
  Link link;
};

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

// With more than one libzmq I/O thread, the first one serves the connections peers open to this site
// (everything received) and the others the connections this site opens (everything sent), so that
// a relay's receive and send copies never wait for each other (ZMQ_AFFINITY is a bit mask of threads).
constexpr std::uint64_t kIncomingIoThreads = 1;

std::uint64_t micros(Clock::time_point t) {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count());
}

std::uint64_t wall_clock_ms() {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                        std::chrono::system_clock::now().time_since_epoch())
                                        .count());
}

}  // namespace

class ZmqTransport::IoLoop {
 public:
  explicit IoLoop(ZmqTransport& t);
  ~IoLoop();
  // One turn of the loop: timers, sends that are due, then waits (at most until `wake_by`, the next
  // timer or the next due send) for something to read or write and handles it. With
  // `until_delivery`, stops reading at the first message delivered to an inbox, so that a caller
  // gets (and can forward) each ring piece while the next one is still arriving. Only the thread that
  // holds the transport's loop_mu_ may call it.
  void step(Clock::time_point wake_by, bool until_delivery = false);
  // Handles queued commands and sends what is due, without waiting (a caller's send()).
  void pump();
  bool stopping() const { return stop_; }
  void publish();
  // The sink of the caller running the loop (nullptr: none); only that caller sets and clears it.
  void set_sink(const PayloadSink* sink) { sink_ = sink; }
  // The message whose payload went into the sink, once.
  std::optional<Message> take_sunk() {
    std::optional<Message> out = std::move(sunk_);
    sunk_.reset();
    return out;
  }

 private:
  bool secure() const { return !t_.options_.insecure; }
  zmq::socket_t open_dealer(const std::string& address, const std::string& server_name);
  Link* ensure_link(const std::string& name);
  void close_link(const std::string& name);
  void enqueue(Link& link, const std::string& to, Message&& msg, Clock::time_point now);
  void enqueue_membership(Link& link, const std::string& to, MessageKind kind, std::string body,
                          Clock::time_point now);
  // When a message of `kind` and `bytes` to `to` handed to its link `now` is delivered, or nullopt when
  // the emulation loses it (mixer kinds only) or a partition cuts the link. Reports what the emulation
  // scheduled to on_emulated_send.
  std::optional<Clock::time_point> due_time(const std::string& to, MessageKind kind, std::size_t bytes,
                                            Clock::time_point now);
  // Whether an emulated partition cuts this site from `to` now.
  bool cut_off(const std::string& to, Clock::time_point now) const;

  void drain_commands();
  void handle_send(std::string to, Message msg);
  void relay(const PayloadSink::Relay& r, zmq::message_t&& frame, std::size_t elements);
  void handle_leave(std::chrono::milliseconds linger);
  bool receive_one();
  void reject(RejectCause cause, const std::string& peer, const std::string& detail);
  void deliver(Message&& msg);
  void tick(Clock::time_point now);
  void gossip_all(Clock::time_point now);
  void process(const MembershipChange& change, Clock::time_point now);
  void resolve_bootstraps();
  void maybe_refute_hint(const std::string& name, Clock::time_point now);
  bool flush(Clock::time_point now);
  // `own`: this process runs the round (it sends in it), as opposed to a resumed checkpoint's round.
  void advance_round(std::uint64_t round, bool own = true);

  ZmqTransport& t_;
  const ZmqTransportOptions& opt_;
  zmq::context_t ctx_;
  std::optional<ZapHandler> zap_;
  zmq::socket_t router_;
  std::optional<Membership> membership_;  // set once the listening address is known
  MessageValidator validator_;
  Reassembler reassembler_;
  std::map<std::string, Link> links_;
  std::vector<Bootstrap> bootstraps_;
  std::map<std::string, std::string> connection_names_;  // insecure mode: routing id -> hello name
  std::map<std::string, Clock::time_point> hinted_;      // last refutation hint sent to a "dead" member
  std::uint64_t next_message_id_ = 1;
  std::uint64_t round_ = 0;
  Clock::time_point next_tick_;
  Clock::time_point last_gossip_all_;
  // Partition windows count from here: the transport's start, or the origin it was given, on this
  // (steady) clock; nullopt while a deferred clock has not started (nothing is cut).
  std::optional<Clock::time_point> partition_origin_ =
      opt_.partition_clock_deferred ? std::nullopt
      : opt_.partition_origin       ? std::optional(Clock::now() - std::chrono::duration_cast<Clock::duration>(
                                                                 std::chrono::system_clock::now() - *opt_.partition_origin))
                                    : std::optional(Clock::now());
  Clock::time_point next_probe_ = Clock::now();     // when dead members next hear our table
  bool gossip_due_ = false;
  bool stop_ = false;
  bool dirty_ = true;
  TransportStats stats_;
  std::mt19937_64 rng_{std::random_device{}()};
  LinkEmulator emulator_;
  std::optional<std::size_t> region_;          // this site's region in the WAN model
  std::set<std::string> unknown_region_logged_;
  struct PeerTraffic {
    std::uint64_t bytes_in = 0, bytes_out = 0;
    std::uint64_t echo_us = 0;              // newest sent_us from this peer
    Clock::time_point echo_received{};      // when it arrived
    std::optional<double> rtt_us;           // smoothed round-trip time
  };
  std::map<std::string, PeerTraffic> traffic_;
  bool delivered_ = false;                  // deliver() ran (or a message was sunk) since step() began
  const PayloadSink* sink_ = nullptr;
  std::optional<Message> sunk_;
  zmq::message_t rid_, hdr_, pay_, extra_;  // reused receive frames
  std::vector<zmq::pollitem_t> items_;
};

ZmqTransport::IoLoop::IoLoop(ZmqTransport& t)
    : t_(t),
      opt_(t.options_),
      ctx_(t.options_.io_threads),
      router_(ctx_, zmq::socket_type::router),
      validator_(t.options_.validation),
      reassembler_(t.pool_),
      emulator_(t.options_.wan_seed ^ std::hash<std::string>{}(t.options_.name)) {
  if (opt_.wan.regions() > 1) {
    region_ = opt_.wan.region_index(opt_.region);
    if (!region_) {
      std::string known;
      for (std::size_t i = 0; i < opt_.wan.regions(); ++i) known += (i ? ", " : "") + opt_.wan.region_name(i);
      throw std::invalid_argument("region '" + opt_.region + "' is not in the WAN model '" + opt_.wan.spec() +
                                  "' (regions: " + known + ")");
    }
  }
  router_.set(zmq::sockopt::linger, 0);
  if (opt_.io_threads > 1) router_.set(zmq::sockopt::affinity, kIncomingIoThreads);
  // Set before bind: libzmq applies it to each connection the listener accepts.
  if (opt_.socket_buffer_bytes > 0) router_.set(zmq::sockopt::rcvbuf, opt_.socket_buffer_bytes);
  // No legitimate frame is larger than a header or a whole payload at the receive caps; libzmq drops a
  // connection that announces a larger one before buffering it, so a member cannot make us allocate
  // gigabytes only for decode_header to refuse them afterwards.
  {
    const std::uint64_t payload_cap = std::min<std::uint64_t>(opt_.limits.max_payload_elements, INT64_MAX / 8) * sizeof(float);
    router_.set(zmq::sockopt::maxmsgsize,
                static_cast<std::int64_t>(std::max<std::uint64_t>(opt_.limits.max_header_bytes, payload_cap)));
  }
  if (secure()) {
    zap_.emplace(ctx_, *opt_.roster);
    router_.set(zmq::sockopt::curve_server, true);
    router_.set(zmq::sockopt::curve_secretkey, opt_.keys->secret_key);
    router_.set(zmq::sockopt::zap_domain, "meridian");
  }
  try {
    router_.bind(opt_.listen);
  } catch (const zmq::error_t& e) {
    throw TransportError("cannot listen on '" + opt_.listen + "': " + e.what());
  }
  t_.endpoint_ = opt_.advertise.empty() ? router_.get(zmq::sockopt::last_endpoint) : opt_.advertise;
  if (t_.endpoint_.find("://0.0.0.0:") != std::string::npos || t_.endpoint_.find("://[::]:") != std::string::npos)
    throw std::invalid_argument("listening on all interfaces (" + t_.endpoint_ +
                                "): also set the advertised address peers should connect to, e.g. "
                                "tcp://10.0.0.1:7000");
  // The membership starts once the bound endpoint (our advertised address) is known.
  std::function<bool(const std::string&)> admissible = is_valid_site_name;
  if (secure()) admissible = [&r = *opt_.roster](const std::string& n) { return r.by_name(n) != nullptr; };
  membership_.emplace(MembershipConfig{opt_.name, t_.endpoint_, opt_.region,
                                       opt_.incarnation ? opt_.incarnation : wall_clock_ms(), opt_.heartbeat_timeout,
                                       opt_.view_lead_rounds, std::move(admissible)},
                      Clock::now());

  for (const auto& spec : opt_.bootstrap) {
    std::string name, address = spec;
    if (auto at = spec.find('@'); at != std::string::npos && spec.find("://") > at) {
      name = spec.substr(0, at);
      address = spec.substr(at + 1);
    }
    if (secure() && name.empty()) {
      const auto* entry = opt_.roster->by_address(address);
      if (!entry)
        throw std::invalid_argument("bootstrap '" + spec +
                                    "': no roster entry lists this address, so its key is unknown; write it as "
                                    "NAME@" + address);
      name = entry->name;
    }
    if (secure() && !opt_.roster->by_name(name))
      throw std::invalid_argument("bootstrap '" + spec + "': site '" + name + "' is not in the roster");
    if (name == opt_.name || address == t_.endpoint_) continue;
    bootstraps_.push_back(Bootstrap{name, Link{address, open_dealer(address, name), {}, false}});
  }
  next_tick_ = Clock::now();
  last_gossip_all_ = Clock::now() - opt_.heartbeat_interval;
  t_.views_ = membership_->views();
}

ZmqTransport::IoLoop::~IoLoop() {
  // Sockets must close before the context terminates; linger was set per socket.
  links_.clear();
  bootstraps_.clear();
  zap_.reset();
  router_.close();
  ctx_.close();
}

zmq::socket_t ZmqTransport::IoLoop::open_dealer(const std::string& address, const std::string& server_name) {
  zmq::socket_t s(ctx_, zmq::socket_type::dealer);
  s.set(zmq::sockopt::linger, 0);
  s.set(zmq::sockopt::sndhwm, opt_.send_high_water_mark);
  if (opt_.io_threads > 1) s.set(zmq::sockopt::affinity, ~kIncomingIoThreads);
  if (opt_.socket_buffer_bytes > 0) s.set(zmq::sockopt::sndbuf, opt_.socket_buffer_bytes);
  if (secure()) {
    s.set(zmq::sockopt::curve_serverkey, opt_.roster->by_name(server_name)->public_key);
    s.set(zmq::sockopt::curve_publickey, opt_.keys->public_key);
    s.set(zmq::sockopt::curve_secretkey, opt_.keys->secret_key);
  }
  s.connect(address);
  return s;
}

Link* ZmqTransport::IoLoop::ensure_link(const std::string& name) {
  if (auto it = links_.find(name); it != links_.end()) return &it->second;
  const auto* record = membership_->find(name);
  if (!record || record->address.empty() || name == opt_.name) return nullptr;
  if (secure() && !opt_.roster->by_name(name)) return nullptr;
  // Across an emulated partition the new connection's hello would be lost, and everything sent on it
  // later refused as coming from a connection that never said hello: connect once the cut heals.
  if (cut_off(name, Clock::now())) return nullptr;
  auto [it, inserted] = links_.emplace(name, Link{record->address, open_dealer(record->address, name), {}, false});
  dirty_ = true;
  // Every connection starts with a hello, so the other side can name it (insecure mode) and learns us.
  enqueue_membership(it->second, name, MessageKind::kHello, encode_hello(membership_->hello()), Clock::now());
  return &it->second;
}

void ZmqTransport::IoLoop::close_link(const std::string& name) {
  auto it = links_.find(name);
  if (it == links_.end()) return;
  stats_.dropped_unreachable += it->second.queue.size();
  links_.erase(it);
  dirty_ = true;
}

bool ZmqTransport::IoLoop::cut_off(const std::string& to, Clock::time_point now) const {
  return !to.empty() && !opt_.partitions.empty() && partition_origin_ &&
         opt_.partitions.cuts(opt_.name, to, std::chrono::duration_cast<std::chrono::microseconds>(now - *partition_origin_));
}

std::optional<Clock::time_point> ZmqTransport::IoLoop::due_time(const std::string& to, MessageKind kind,
                                                                std::size_t bytes, Clock::time_point now) {
  if (cut_off(to, now)) return std::nullopt;  // an emulated partition drops everything, membership included
  if (!opt_.wan.emulates() || to.empty()) return now;  // bootstrap links: name (and region) unknown yet
  const LinkSpec* spec = nullptr;
  if (opt_.wan.regions() == 1) {
    spec = &opt_.wan.link(0, 0);
  } else {
    const auto* record = membership_->find(to);
    if (!record) return now;  // not introduced yet: only its hello travels unemulated
    const auto theirs = opt_.wan.region_index(record->region);
    if (!theirs) {
      if (unknown_region_logged_.insert(to).second)
        spdlog::warn("'{}': peer '{}' announces region '{}', which the WAN model '{}' does not have; its link is "
                     "not emulated",
                     opt_.name, to, record->region, opt_.wan.spec());
      return now;
    }
    spec = &opt_.wan.link(*region_, *theirs);
  }
  std::optional<Clock::time_point> due;
  if (is_mixer_kind(kind) || spec->loss == 0) {
    due = emulator_.schedule(to, *spec, bytes, now);
  } else {
    LinkSpec lossless = *spec;
    lossless.loss = 0;
    due = emulator_.schedule(to, lossless, bytes, now);
  }
  if (due && opt_.on_emulated_send) opt_.on_emulated_send(EmulatedSend{to, kind, bytes, now, *due});
  return due;
}

void ZmqTransport::IoLoop::enqueue(Link& link, const std::string& to, Message&& msg, Clock::time_point now) {
  auto chunks = encode_message(msg, opt_.validation.model_fingerprint, next_message_id_++, opt_.limits);
  std::size_t with_payload = 0, bytes = 0;
  for (const auto& c : chunks) {
    with_payload += c.elements > 0;
    bytes += c.header.size() + c.elements * sizeof(float);
  }
  // The whole message is one unit on the emulated link: its chunks leave together when it is delivered.
  const auto delivered = due_time(to, msg.kind, bytes, now);
  if (!delivered) {
    ++stats_.emulated_lost;
    dirty_ = true;
    t_.pool_.give(std::move(msg.payload));
    return;
  }
  std::unique_ptr<SentPayload> holder;
  if (with_payload > 0) holder = std::make_unique<SentPayload>(std::move(msg.payload), &t_.pool_, with_payload);
  else t_.pool_.give(std::move(msg.payload));
  const Clock::time_point due = *delivered;
  for (std::size_t i = 0; i < chunks.size(); ++i) {
    auto& c = chunks[i];
    Outgoing o;
    o.due = due;
    o.header = zmq::message_t(c.header.data(), c.header.size());
    o.bytes = c.header.size() + c.elements * sizeof(float);
    o.last_chunk = i + 1 == chunks.size();
    if (c.elements > 0) {
      o.payload = zmq::message_t(holder->data.data() + c.offset, c.elements * sizeof(float), release_payload,
                                 holder.get());
      o.has_payload = true;
    }
    link.queue.push_back(std::move(o));
  }
  // From here the zero-copy frames own the holder through its reference count.
  (void)holder.release();
}

void ZmqTransport::IoLoop::enqueue_membership(Link& link, const std::string& to, MessageKind kind, std::string body,
                                              Clock::time_point now) {
  Message m;
  m.kind = kind;
  m.body = std::move(body);
  enqueue(link, to, std::move(m), now);
}

void ZmqTransport::IoLoop::advance_round(std::uint64_t round, bool own) {
  if (own) membership_->note_own_round(round);
  if (round <= round_) return;
  round_ = round;
  validator_.advance_round(round);
  membership_->note_round(round);
}

void ZmqTransport::IoLoop::drain_commands() {
  std::uint64_t ignored;
  [[maybe_unused]] auto n = ::read(t_.wake_fd_, &ignored, sizeof ignored);
  std::deque<Command> commands;
  {
    std::lock_guard lock(t_.mu_);
    commands.swap(t_.commands_);
  }
  for (auto& cmd : commands) {
    switch (cmd.type) {
      case Command::Type::kSend: handle_send(std::move(cmd.to), std::move(cmd.msg)); break;
      case Command::Type::kSetRound: advance_round(cmd.round); break;
      case Command::Type::kResumeRound: advance_round(cmd.round, false); break;
      case Command::Type::kStartPartitionClock:
        if (!partition_origin_) partition_origin_ = Clock::now();
        break;
      case Command::Type::kLeave: handle_leave(std::chrono::milliseconds(cmd.round)); return;
      case Command::Type::kStop: stop_ = true; return;
    }
  }
}

void ZmqTransport::IoLoop::handle_send(std::string to, Message msg) {
  if (is_mixer_kind(msg.kind)) advance_round(msg.round);
  if (to == opt_.name) {
    msg.from = opt_.name;
    deliver(std::move(msg));
    return;
  }
  Link* link = membership_->is_alive(to) ? ensure_link(to) : nullptr;
  if (!link) {
    ++stats_.dropped_unreachable;
    dirty_ = true;
    t_.pool_.give(std::move(msg.payload));
    return;
  }
  enqueue(*link, to, std::move(msg), Clock::now());
}

void ZmqTransport::IoLoop::relay(const PayloadSink::Relay& r, zmq::message_t&& frame, std::size_t elements) {
  // Like handle_send, for a payload that is already a libzmq frame (the received one, overwritten with
  // the result): it leaves as it is, one chunk, without a copy.
  if (is_mixer_kind(r.header.kind)) advance_round(r.header.round);
  const auto now = Clock::now();
  Link* link = r.to != opt_.name && membership_->is_alive(r.to) ? ensure_link(r.to) : nullptr;
  if (!link) {
    if (r.to == opt_.name) {
      Message self = r.header;
      self.from = opt_.name;
      const auto* p = static_cast<const float*>(frame.data());
      self.payload.assign(p, p + elements);
      deliver(std::move(self));
      return;
    }
    ++stats_.dropped_unreachable;
    dirty_ = true;
    return;
  }
  auto chunks = encode_message(r.header, opt_.validation.model_fingerprint, next_message_id_++, opt_.limits, elements);
  const auto& c = chunks.front();  // the caller checked that the frame fits one chunk
  const std::size_t bytes = c.header.size() + elements * sizeof(float);
  const auto delivered = due_time(r.to, r.header.kind, bytes, now);
  if (!delivered) {
    ++stats_.emulated_lost;
    dirty_ = true;
    return;
  }
  Outgoing o;
  o.due = *delivered;
  o.header = zmq::message_t(c.header.data(), c.header.size());
  o.bytes = bytes;
  if (elements > 0) {
    o.payload = std::move(frame);
    o.has_payload = true;
  }
  link->queue.push_back(std::move(o));
  // Out at once, as a send() would go: the caller may next take mail already in the inbox, which
  // does not run the loop.
  flush(now);
}

void ZmqTransport::IoLoop::handle_leave(std::chrono::milliseconds linger) {
  // Read what has arrived first: a member whose own leave is waiting there has closed its end, and a
  // message queued to it now could never go out and would hold the exit for the whole linger. Reading
  // its leave closes its link instead (process()). Bounded like step()'s reads.
  for (int i = 0; i < 4096 && receive_one(); ++i) {
  }
  const auto now = Clock::now();
  membership_->leave();
  const std::string body = encode_leave(LeaveInfo{membership_->incarnation()});
  for (const auto& r : membership_->alive_others())
    if (Link* link = ensure_link(r.name)) enqueue_membership(*link, r.name, MessageKind::kLeave, body, now);
  // Give the leave (and whatever was queued before it) a bounded chance to go out.
  const auto deadline = now + linger;
  while (Clock::now() < deadline) {
    flush(Clock::time_point::max());
    bool pending = false;
    for (auto& [name, link] : links_) pending = pending || !link.queue.empty();
    if (!pending) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  const int remaining = static_cast<int>(
      std::max<std::int64_t>(0, std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count()));
  for (auto& [name, link] : links_) link.dealer.set(zmq::sockopt::linger, remaining);
  spdlog::info("'{}' left the federation", opt_.name);
  stop_ = true;
}

void ZmqTransport::IoLoop::reject(RejectCause cause, const std::string& peer, const std::string& detail) {
  t_.rejections_.record(cause, peer, detail);
}

void ZmqTransport::IoLoop::deliver(Message&& msg) {
  delivered_ = true;
  {
    std::lock_guard lock(t_.mu_);
    (msg.kind == MessageKind::kControl ? t_.control_inbox_ : t_.inbox_).push_back(std::move(msg));
  }
  t_.arrived_.notify_all();
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
  if (secure()) {
    user_id = zmq_msg_gets(hdr_.handle(), "User-Id");
    label = user_id ? user_id : hex_id(rid_);
  } else {
    auto it = connection_names_.find(rid_.to_string());
    label = it != connection_names_.end() ? it->second : hex_id(rid_);
  }
  if (extra) return drop(RejectCause::kMalformed, label, "more than two frames after the routing id");

  auto decoded = decode_header({static_cast<const std::byte*>(hdr_.data()), hdr_.size()}, payload_bytes, opt_.limits);
  if (auto* r = std::get_if<Rejection>(&decoded)) return drop(r->cause, label, r->detail);
  const WireHeader& h = std::get<WireHeader>(decoded);

  // Who sent it: the roster entry of the key (secure) or the hello of this connection (insecure).
  std::string name;
  std::optional<HelloInfo> hello;
  if (h.kind == MessageKind::kHello) {
    hello = decode_hello(h.body);
    if (!hello || !is_valid_site_name(hello->name))
      return drop(RejectCause::kMalformed, label, "hello body is not a well-formed Hello");
  }
  if (secure()) {
    if (!user_id) return drop(RejectCause::kUnknownSender, label, "connection has no authenticated key");
    name = user_id;
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

  if (auto r = validator_.check(name, h)) return drop(r->cause, name, r->detail);

  stats_.bytes_received += hdr_.size() + (payload_bytes ? *payload_bytes : 0);
  traffic_[name].bytes_in += hdr_.size() + (payload_bytes ? *payload_bytes : 0);
  dirty_ = true;
  MembershipChange change;
  switch (h.kind) {
    case MessageKind::kHello:
      change = membership_->on_hello(*hello, now);
      process(change, now);
      resolve_bootstraps();
      if (membership_->is_alive(name)) {
        if (Link* link = ensure_link(name))
          enqueue_membership(*link, name, MessageKind::kMembers, encode_members(membership_->snapshot()), now);
      } else {
        maybe_refute_hint(name, now);
      }
      ++stats_.messages_received;
      return true;
    case MessageKind::kMembers: {
      auto list = decode_members(h.body);
      if (!list) return drop(RejectCause::kMalformed, name, "member list body is not a well-formed MemberList");
      change = membership_->on_members(*list, now);
      membership_->heard_from(name, now);
      break;
    }
    case MessageKind::kHeartbeat: {
      auto hb = decode_heartbeat(h.body);
      if (!hb) return drop(RejectCause::kMalformed, name, "heartbeat body is not a well-formed Heartbeat");
      change = membership_->on_heartbeat(name, *hb, now);
      {
        auto& tr = traffic_[name];
        tr.echo_us = hb->sent_us;
        tr.echo_received = now;
        // Only echoes of our own clock readings are meaningful; ignore anything from the future.
        const std::uint64_t now_us = micros(now);
        if (hb->echo_us != 0 && hb->echo_us + hb->held_us <= now_us) {
          const double sample = static_cast<double>(now_us - hb->echo_us - hb->held_us);
          tr.rtt_us = tr.rtt_us ? 0.8 * *tr.rtt_us + 0.2 * sample : sample;
        }
      }
      break;
    }
    case MessageKind::kLeave: {
      auto lv = decode_leave(h.body);
      if (!lv) return drop(RejectCause::kMalformed, name, "leave body is not a well-formed Leave");
      change = membership_->on_leave(name, *lv);
      break;
    }
    case MessageKind::kControl:
      if (!membership_->is_alive(name)) return drop(RejectCause::kUnknownSender, name, "not a live member");
      {
        Message m = h.to_message();
        m.from = name;
        deliver(std::move(m));
      }
      membership_->heard_from(name, now);
      ++stats_.messages_received;
      return true;
    case MessageKind::kPushSum:
    case MessageKind::kReduceChunk:
    case MessageKind::kGroupChunk:
    case MessageKind::kCompressedShare: {
      // A site that left gracefully sent its last mixer messages before its Leave, on this same
      // connection; the news of the leave can overtake them through a third site's gossip, so they are
      // still taken (validated as always) until the connection itself delivers the Leave.
      const auto* record = membership_->find(name);
      const bool departed = record && record->state == MemberState::kLeft;
      if (!membership_->is_alive(name) && !departed) {
        maybe_refute_hint(name, now);
        return drop(RejectCause::kUnknownSender, name, "mixer message from a site that is not a live member");
      }
      membership_->heard_from(name, now);
      // The caller's sink takes a message only while no earlier one waits for it to be taken. A relayed
      // result is written over the received frame, which then goes out again as it is: that needs a
      // frame aligned for floats that fits one chunk of ours (otherwise the message takes the inbox
      // path and the sink is applied from a pooled buffer, see take_from).
      const PayloadSink* sink = sunk_ ? nullptr : sink_;
      const std::size_t bytes_in = payload_bytes ? *payload_bytes : 0;
      std::span<float> relay_frame;
      if (sink && sink->relay) {
        if (bytes_in > opt_.limits.chunk_bytes || reinterpret_cast<std::uintptr_t>(pay_.data()) % alignof(float) != 0)
          sink = nullptr;
        else if (bytes_in > 0 && (!sink->addend.empty() || sink->scale != 1.0f))
          relay_frame = {static_cast<float*>(pay_.data()), bytes_in / sizeof(float)};  // else it is the result
      }
      auto result = reassembler_.add(name, h, {static_cast<const std::byte*>(pay_.data()), bytes_in}, sink,
                                     relay_frame);
      for (const auto& r : result.rejections) reject(r.cause, name, r.detail);
      if (result.complete) {
        validator_.accept(name, *result.complete);
        ++stats_.messages_received;
        if (result.sunk) {
          if (sink->relay) relay(*sink->relay, std::move(pay_), bytes_in / sizeof(float));
          sunk_ = std::move(*result.complete);
          delivered_ = true;
        } else {
          deliver(std::move(*result.complete));
        }
      }
      return true;
    }
  }
  ++stats_.messages_received;
  if (!membership_->is_alive(name) && membership_->find(name) &&
      membership_->find(name)->state == MemberState::kDead)
    maybe_refute_hint(name, now);
  process(change, now);
  return true;
}

void ZmqTransport::IoLoop::maybe_refute_hint(const std::string& name, Clock::time_point now) {
  // A site we consider dead is talking to us: tell it (our table says so) so that it refutes with a
  // higher incarnation. At most once per heartbeat interval per site.
  const auto* r = membership_->find(name);
  if (!r || r->state != MemberState::kDead) return;
  auto& last = hinted_[name];
  if (now - last < opt_.heartbeat_interval) return;
  last = now;
  if (Link* link = ensure_link(name))
    enqueue_membership(*link, name, MessageKind::kMembers, encode_members(membership_->snapshot()), now);
}

void ZmqTransport::IoLoop::process(const MembershipChange& change, Clock::time_point now) {
  // A restarted site may listen elsewhere now, and what is still queued for it was meant for the dead
  // process: the old connection goes, and the joined handling below opens a new one with a hello.
  for (const auto& name : change.restarted) close_link(name);
  for (const auto& name : change.joined) {
    const auto* record = membership_->find(name);
    if (auto it = links_.find(name); it != links_.end() && record && it->second.address != record->address)
      close_link(name);  // a new incarnation heard of through gossip, listening at a new address
    spdlog::info("'{}': member '{}' is alive", opt_.name, name);
    // A site that left and came back starts afresh (its partial message and replay records were kept
    // across its leave for the messages still on their way, see receive_one).
    reassembler_.forget(name);
    validator_.forget(name);
    if (Link* link = ensure_link(name))
      enqueue_membership(*link, name, MessageKind::kMembers, encode_members(membership_->snapshot()), now);
  }
  auto gone = [&](const std::string& name, const char* how) {
    spdlog::info("'{}': member '{}' {}", opt_.name, name, how);
    close_link(name);
    emulator_.forget(name);
  };
  for (const auto& name : change.died) {
    gone(name, "is dead (no heartbeat within the timeout)");
    reassembler_.forget(name);
    validator_.forget(name);
  }
  for (const auto& name : change.left) gone(name, "left");
  if (change.any()) {
    gossip_due_ = true;
    dirty_ = true;
  }
  if (!change.joined.empty()) resolve_bootstraps();
}

void ZmqTransport::IoLoop::resolve_bootstraps() {
  for (auto it = bootstraps_.begin(); it != bootstraps_.end();) {
    std::string found;
    for (const auto& r : membership_->alive_others())
      if ((!it->name.empty() && r.name == it->name) || (it->name.empty() && r.address == it->link.address)) found = r.name;
    if (found.empty()) {
      ++it;
      continue;
    }
    // Keep the bootstrap connection as this member's link when it has none: one connection per peer.
    if (!links_.contains(found)) links_.emplace(found, std::move(it->link));
    it = bootstraps_.erase(it);
    dirty_ = true;
  }
}

void ZmqTransport::IoLoop::gossip_all(Clock::time_point now) {
  const std::string body = encode_members(membership_->snapshot());
  for (const auto& r : membership_->alive_others())
    if (Link* link = ensure_link(r.name)) enqueue_membership(*link, r.name, MessageKind::kMembers, body, now);
  gossip_due_ = false;
  last_gossip_all_ = now;
}

void ZmqTransport::IoLoop::tick(Clock::time_point now) {
  process(membership_->tick(now), now);
  auto others = membership_->alive_others();
  for (const auto& r : others) {
    HeartbeatInfo hb{membership_->incarnation(), membership_->newest_round(), micros(now), 0, 0};
    if (auto it = traffic_.find(r.name); it != traffic_.end() && it->second.echo_us != 0) {
      hb.echo_us = it->second.echo_us;
      hb.held_us = micros(now) - micros(it->second.echo_received);
    }
    if (Link* link = ensure_link(r.name))
      enqueue_membership(*link, r.name, MessageKind::kHeartbeat, encode_heartbeat(hb), now);
  }
  if (gossip_due_) {
    gossip_all(now);
  } else if (!others.empty()) {
    // Anti-entropy: one random member hears our whole table every tick.
    const auto& r = others[std::uniform_int_distribution<std::size_t>(0, others.size() - 1)(rng_)];
    if (Link* link = ensure_link(r.name))
      enqueue_membership(*link, r.name, MessageKind::kMembers, encode_members(membership_->snapshot()), now);
  }
  if (now >= next_probe_) {
    // Members we declared dead hear our table now and then: after a partition heals (or a false death)
    // each side learns that the other considers it dead, refutes, and the two sides find each other
    // again; nobody else would ever contact them. A truly dead site costs one small message per probe.
    const std::string table = encode_members(membership_->snapshot());
    for (const auto& r : membership_->records())
      if (r.state == MemberState::kDead && r.name != opt_.name)
        if (Link* link = ensure_link(r.name)) enqueue_membership(*link, r.name, MessageKind::kMembers, table, now);
    next_probe_ = now + opt_.heartbeat_timeout;
  }
  const std::string hello = encode_hello(membership_->hello());
  for (auto& b : bootstraps_) enqueue_membership(b.link, b.name, MessageKind::kHello, hello, now);
  for (auto it = hinted_.begin(); it != hinted_.end();)
    it = now - it->second > opt_.heartbeat_timeout ? hinted_.erase(it) : std::next(it);
  next_tick_ = now + opt_.heartbeat_interval;
}

bool ZmqTransport::IoLoop::flush(Clock::time_point now) {
  auto drain = [&](Link& link, std::uint64_t* bytes_out) {
    link.blocked = false;
    while (!link.queue.empty() && link.queue.front().due <= now) {
      Outgoing& o = link.queue.front();
      const auto flags = o.has_payload ? zmq::send_flags::sndmore | zmq::send_flags::dontwait : zmq::send_flags::dontwait;
      if (!link.dealer.send(o.header, flags)) {
        link.blocked = true;
        return;
      }
      // Once the first frame is accepted libzmq accepts the rest of the multipart message.
      if (o.has_payload) (void)link.dealer.send(o.payload, zmq::send_flags::dontwait);
      stats_.bytes_sent += o.bytes;
      if (bytes_out) *bytes_out += o.bytes;
      if (o.last_chunk) ++stats_.messages_sent;
      dirty_ = true;
      link.queue.pop_front();
    }
  };
  bool any_blocked = false;
  for (auto& [name, link] : links_) {
    drain(link, &traffic_[name].bytes_out);
    any_blocked = any_blocked || link.blocked;
  }
  for (auto& b : bootstraps_) drain(b.link, nullptr);
  return any_blocked;
}

void ZmqTransport::IoLoop::publish() {
  if (!dirty_) return;
  dirty_ = false;
  std::vector<MemberStatus> status;
  for (const auto& r : membership_->records()) {
    MemberStatus m{r, links_.contains(r.name), std::nullopt, 0, 0};
    if (auto it = traffic_.find(r.name); it != traffic_.end()) {
      m.bytes_in = it->second.bytes_in;
      m.bytes_out = it->second.bytes_out;
      if (it->second.rtt_us) m.rtt = std::chrono::microseconds(static_cast<std::int64_t>(*it->second.rtt_us));
    }
    status.push_back(std::move(m));
  }
  std::lock_guard lock(t_.mu_);
  t_.views_ = membership_->views();
  t_.member_status_ = std::move(status);
  t_.stats_ = stats_;
  if (zap_) {
    t_.stats_.zap_admitted = zap_->admitted();
    t_.stats_.zap_denied = zap_->denied();
  }
}

void ZmqTransport::IoLoop::pump() {
  drain_commands();
  if (stop_) return;
  flush(Clock::now());
  publish();
}

void ZmqTransport::IoLoop::step(Clock::time_point wake_by, bool until_delivery) {
  delivered_ = false;
  auto now = Clock::now();
  if (now >= next_tick_) tick(now);
  if (gossip_due_ && now - last_gossip_all_ >= opt_.heartbeat_interval / 4) gossip_all(now);
  flush(now);
  publish();

  // Sleep until the next tick, the next due message, `wake_by`, or something to read or write.
  Clock::time_point deadline = std::min(next_tick_, wake_by);
  if (gossip_due_) deadline = std::min(deadline, last_gossip_all_ + opt_.heartbeat_interval / 4);
  items_.clear();
  items_.push_back({router_.handle(), 0, ZMQ_POLLIN, 0});
  items_.push_back({nullptr, t_.wake_fd_, ZMQ_POLLIN, 0});
  if (zap_) items_.push_back({zap_->socket().handle(), 0, ZMQ_POLLIN, 0});
  for (auto& [name, link] : links_) {
    if (link.blocked) items_.push_back({link.dealer.handle(), 0, ZMQ_POLLOUT, 0});
    else if (!link.queue.empty()) deadline = std::min(deadline, link.queue.front().due);
  }
  now = Clock::now();
  auto wait = std::chrono::ceil<std::chrono::milliseconds>(deadline - now);
  if (wait.count() < 0) wait = std::chrono::milliseconds(0);
  // A signal (the daemon handles SIGINT/SIGTERM) interrupts the poll: just go round again.
  if (zmq_poll(items_.data(), static_cast<int>(items_.size()), static_cast<long>(wait.count())) < 0) {
    if (zmq_errno() == EINTR) return;
    throw zmq::error_t();
  }

  if (items_[1].revents & ZMQ_POLLIN) drain_commands();
  if (stop_) return;
  if (zap_ && (items_[2].revents & ZMQ_POLLIN)) {
    zap_->handle();
    dirty_ = true;
  }
  if (items_[0].revents & ZMQ_POLLIN) {
    // Bounded so that commands, heartbeats and the ZAP handler are not starved by a flood.
    for (int i = 0; i < 256 && !(until_delivery && delivered_) && receive_one(); ++i) {
    }
  }
}

// ---------------------------------------------------------------------------------------------------

ZmqTransport::ZmqTransport(ZmqTransportOptions options) : options_(std::move(options)), pool_(options_.pooled_buffers) {
  if (!is_valid_site_name(options_.name))
    throw std::invalid_argument("site name '" + options_.name + "' must be 1-64 letters, digits, '.', '_' or '-'");
  if (options_.heartbeat_interval.count() <= 0 || options_.heartbeat_timeout <= options_.heartbeat_interval)
    throw std::invalid_argument("heartbeat timeout (" + std::to_string(options_.heartbeat_timeout.count()) +
                                " ms) must exceed the heartbeat interval (" +
                                std::to_string(options_.heartbeat_interval.count()) + " ms), which must be positive");
  if (options_.io_threads < 1)
    throw std::invalid_argument("io_threads (" + std::to_string(options_.io_threads) + ") must be at least 1");
  if (options_.socket_buffer_bytes < 0)
    throw std::invalid_argument("socket buffer size (" + std::to_string(options_.socket_buffer_bytes) +
                                " bytes) must be positive, or 0 for the OS default");
  if (options_.insecure) {
    spdlog::warn("*** INSECURE: site '{}' uses plain TCP: no encryption, no authentication; anyone who can reach "
                 "{} can read the model and inject messages. Use only for local experiments. ***",
                 options_.name, options_.listen);
  } else {
    if (!options_.keys) throw std::invalid_argument("secure mode needs the site's key pair (see 'meridian keygen')");
    if (!options_.roster) throw std::invalid_argument("secure mode needs a roster file");
    const auto* me = options_.roster->by_name(options_.name);
    if (!me) throw std::invalid_argument("site '" + options_.name + "' is not in the roster");
    if (me->public_key != options_.keys->public_key)
      throw std::invalid_argument("the roster lists another public key for site '" + options_.name +
                                  "' than this site's key pair");
  }
  wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_fd_ < 0) throw TransportError("cannot create an eventfd for the transport's I/O thread");
  try {
    loop_ = std::make_unique<IoLoop>(*this);
  } catch (...) {
    ::close(wake_fd_);
    throw;
  }
  caller_driven_ = !options_.wan.emulates();
  thread_ = std::thread([this] {
    try {
      std::unique_lock loop_lock(loop_mu_);
      while (!loop_->stopping() && !broken_) {
        // A caller that sends and receives runs the loop itself: stay out of its way while one waits for
        // the loop or its lease lasts (this thread holds loop_mu_ except while parked here).
        const auto until = lease_until();
        if (callers_waiting_ > 0 || Clock::now() < until) {
          loop_cv_.wait_until(loop_lock, std::max(until, Clock::now() + kCallerLease));
          continue;
        }
        loop_->step(Clock::time_point::max());
      }
      if (!broken_) loop_->publish();
    } catch (const std::exception& e) {
      spdlog::error("transport I/O thread of '{}' failed: {}", options_.name, e.what());
      std::lock_guard lock(mu_);
      failure_ = std::current_exception();
    }
    {
      std::lock_guard lock(mu_);
      stopped_ = true;
    }
    arrived_.notify_all();
  });
}

ZmqTransport::~ZmqTransport() {
  if (thread_.joinable()) {
    {
      std::lock_guard lock(mu_);
      commands_.push_back(Command{Command::Type::kStop, {}, {}, 0});
    }
    wake_io_thread();
    thread_.join();
  }
  loop_.reset();
  ::close(wake_fd_);
}

void ZmqTransport::rethrow_if_failed() const {
  if (failure_) {
    try {
      std::rethrow_exception(failure_);
    } catch (const std::exception& e) {
      throw TransportError(std::string("transport of '") + options_.name + "' failed: " + e.what());
    }
  }
  if (stopped_) throw TransportError("transport of '" + options_.name + "' is closed");
}

std::chrono::steady_clock::time_point ZmqTransport::lease_until() const {
  return std::chrono::steady_clock::time_point(std::chrono::steady_clock::duration(lease_until_.load()));
}

void ZmqTransport::extend_lease() {
  lease_until_.store((std::chrono::steady_clock::now() + kCallerLease).time_since_epoch().count());
}

void ZmqTransport::wake_io_thread() {
  // Ends the lease and interrupts whoever polls, so that stop and leave commands are handled at once.
  lease_until_.store(0);
  loop_cv_.notify_all();
  std::uint64_t one = 1;
  [[maybe_unused]] auto n = ::write(wake_fd_, &one, sizeof one);
}

void ZmqTransport::loop_failed() {
  {
    std::lock_guard lock(mu_);
    failure_ = std::current_exception();
  }
  broken_ = true;
  lease_until_.store(0);
  loop_cv_.notify_all();
  arrived_.notify_all();
}

bool ZmqTransport::take_loop(std::unique_lock<std::mutex>& loop_lock) {
  if (!caller_driven_ || broken_) return false;
  extend_lease();
  if (!loop_lock.try_lock()) {
    // Another caller runs the loop and delivers for us; or the I/O thread polls: interrupt it, it then
    // parks for the lease and hands over the sockets with the mutex (a full memory barrier, which is
    // what libzmq asks for when a socket moves between threads).
    if (caller_in_loop_) return false;
    ++callers_waiting_;
    std::uint64_t one = 1;
    [[maybe_unused]] auto n = ::write(wake_fd_, &one, sizeof one);
    loop_lock.lock();
    --callers_waiting_;
  }
  if (loop_->stopping() || broken_) {
    loop_lock.unlock();
    return false;
  }
  caller_in_loop_ = true;
  return true;
}

void ZmqTransport::post(Command cmd) {
  {
    std::lock_guard lock(mu_);
    rethrow_if_failed();
    commands_.push_back(std::move(cmd));
  }
  // Nobody polls (the I/O thread is parked for a caller's lease): hand the command to libzmq here,
  // which saves waking a thread per message. Otherwise wake the poller.
  std::unique_lock loop_lock(loop_mu_, std::try_to_lock);
  if (caller_driven_ && loop_lock.owns_lock() && !loop_->stopping() && !broken_) {
    extend_lease();
    try {
      loop_->pump();
    } catch (const std::exception&) {
      loop_failed();
      std::lock_guard lock(mu_);
      rethrow_if_failed();
    }
    return;
  }
  if (loop_lock.owns_lock()) loop_lock.unlock();
  std::uint64_t one = 1;
  [[maybe_unused]] auto n = ::write(wake_fd_, &one, sizeof one);
}

void ZmqTransport::send(const std::string& to, Message msg) {
  post(Command{Command::Type::kSend, to, std::move(msg), 0});
}

std::optional<Received> ZmqTransport::take_from(std::deque<Message>& box, std::chrono::milliseconds timeout,
                                                const PayloadSink* sink) {
  const auto deadline = Clock::now() + timeout;
  auto pop = [&]() -> std::optional<Message> {
    if (box.empty()) return std::nullopt;
    Message m = std::move(box.front());
    box.pop_front();
    return m;
  };
  // A message that came through the inbox carries its payload: apply it to the sink from there.
  auto hand_out = [&](Message m) -> Received {
    return sink ? sink_received(*sink, std::move(m)) : Received{std::move(m), false};
  };
  {
    std::unique_lock lock(mu_);
    if (auto m = pop()) {
      lock.unlock();
      return hand_out(std::move(*m));
    }
  }
  std::unique_lock loop_lock(loop_mu_, std::defer_lock);
  if (take_loop(loop_lock)) {
    std::optional<Message> got, sunk;
    bool stopping = false;
    loop_->set_sink(sink);
    try {
      // At least one turn, even past the deadline, so that mail already in libzmq is not reported missing.
      for (bool first = true;; first = false) {
        {
          std::lock_guard lock(mu_);
          if ((got = pop())) break;
        }
        if ((sunk = loop_->take_sunk())) break;
        stopping = loop_->stopping();
        if (stopping || (!first && Clock::now() >= deadline)) break;
        loop_->step(std::min(deadline, Clock::now() + kCallerSlice), true);
      }
    } catch (const std::exception&) {
      loop_failed();
    }
    loop_->set_sink(nullptr);
    caller_in_loop_ = false;
    extend_lease();
    loop_lock.unlock();
    if (stopping) wake_io_thread();  // a stop or leave ran here: let the I/O thread finish
    if (sunk) return Received{std::move(*sunk), true};
    if (got) return hand_out(std::move(*got));
  }
  std::unique_lock lock(mu_);
  arrived_.wait_until(lock, deadline, [&] { return !box.empty() || stopped_ || failure_; });
  if (auto m = pop()) {
    lock.unlock();
    return hand_out(std::move(*m));
  }
  rethrow_if_failed();
  return std::nullopt;
}

std::optional<Message> ZmqTransport::receive(std::chrono::milliseconds timeout) {
  auto got = take_from(inbox_, timeout, nullptr);
  if (!got) return std::nullopt;
  return std::move(got->msg);
}

std::optional<Received> ZmqTransport::receive_into(const PayloadSink& sink, std::chrono::milliseconds timeout) {
  return take_from(inbox_, timeout, &sink);
}

std::optional<Message> ZmqTransport::receive_control(std::chrono::milliseconds timeout) {
  auto got = take_from(control_inbox_, timeout, nullptr);
  if (!got) return std::nullopt;
  return std::move(got->msg);
}

View ZmqTransport::view_for(std::uint64_t round) const {
  std::lock_guard lock(mu_);
  const View* best = &views_.front();
  for (const auto& v : views_)
    if (v.effective_round <= round) best = &v;
  return *best;
}

View ZmqTransport::latest_view() const {
  std::lock_guard lock(mu_);
  return views_.back();
}

void ZmqTransport::set_round(std::uint64_t round) { post(Command{Command::Type::kSetRound, {}, {}, round}); }

void ZmqTransport::start_partition_clock() {
  if (options_.partition_clock_deferred) post(Command{Command::Type::kStartPartitionClock, {}, {}, 0});
}

void ZmqTransport::resume_round(std::uint64_t round) { post(Command{Command::Type::kResumeRound, {}, {}, round}); }

void ZmqTransport::leave(std::chrono::milliseconds linger) {
  if (!thread_.joinable()) return;
  post(Command{Command::Type::kLeave, {}, {}, static_cast<std::uint64_t>(linger.count())});
  wake_io_thread();
  thread_.join();
  loop_.reset();  // closes the sockets; their linger lets the leave reach the peers
}

std::vector<MemberStatus> ZmqTransport::members() const {
  std::lock_guard lock(mu_);
  return member_status_;
}

std::vector<std::string> ZmqTransport::alive_members() const {
  std::lock_guard lock(mu_);
  std::vector<std::string> out;
  for (const auto& m : member_status_)
    if (m.record.state == MemberState::kAlive) out.push_back(m.record.name);
  return out;
}

TransportStats ZmqTransport::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

}  // namespace meridian::peer
