// The ZeroMQ transport's loop (private to peer/zmq_*.cc): the state that whoever runs the loop owns —
// sockets, outbound links and their queues, the membership driver, reassembly and validation — and
// one turn of the loop. Its methods live in files named for what they do:
//   zmq_socket_setup.cc     binding the ROUTER, CURVE and the ZAP handler, opening DEALERs, bootstraps
//   zmq_outbound_links.cc   per-peer links, queueing encoded messages, flushing them to libzmq, leaving
//   zmq_link_shaping.cc     when the WAN emulation and partitions let a queued message go
//   zmq_frame_receiver.cc   reading frames, naming the sender, validating, handing membership on
//   zmq_sink_forward.cc     mixer messages: reassembly, the caller's sink, and forwarding a relay
//   zmq_membership_port.cc  what membership decisions do to links and bootstrap connections
//   zmq_connection_watch.cc socket monitors: why bootstrap sites do not answer, plain connections
//   zmq_io_loop.cc          one turn of the loop, commands from other threads, publishing status
// Thread-safety: only the thread holding the transport's loop_mu_ calls it (peer/zmq/zmq_transport.h).
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <zmq.hpp>

#include "peer/link_emulator.h"
#include "peer/membership_driver.h"
#include "peer/reassembler.h"
#include "peer/send_rate_limit.h"
#include "peer/zmq/zap_handler.h"
#include "peer/zmq/zmq_socket_monitor.h"
#include "peer/zmq/zmq_transport.h"

namespace meridian::peer {

// One chunk queued on a link: its frames, and when the (emulated) link delivers it.
struct Outgoing {
  std::chrono::steady_clock::time_point due;
  zmq::message_t header;
  zmq::message_t payload;
  bool has_payload = false;
  bool last_chunk = true;
  std::size_t bytes = 0;
};

// The outgoing connection to one peer, and what waits to go out on it (FIFO).
struct Link {
  std::string address;
  zmq::socket_t dealer;
  std::deque<Outgoing> queue;
  bool blocked = false;  // libzmq's queue for this peer is full; poll for POLLOUT
};

// A site to contact first, until it is known as a member.
struct Bootstrap {
  std::string name;  // empty when only the address is known (insecure mode)
  Link link;
  // What libzmq reports about the link's connection (zmq_connection_watch.cc); declared after the
  // link, so that it stops watching before the link's socket closes.
  std::unique_ptr<ZmqSocketMonitor> monitor;
  bool connected = false;     // a TCP connection is up
  bool handshake_ok = false;  // its handshake succeeded
  int cut_handshakes = 0;     // connections closed during the handshake since the last that succeeded
  std::string problem;        // why the site has not been reached, for people; empty: none known
  bool key_refused = false;   // its handshake refused this site's key (the cause of `problem`)
};

class ZmqTransport::IoLoop final : private MembershipPort {
 public:
  using Clock = std::chrono::steady_clock;

  // Binds, sets up CURVE and the ZAP handler, starts the membership and opens the bootstrap
  // connections. Throws as ZmqTransport's constructor says.
  explicit IoLoop(ZmqTransport& t);
  ~IoLoop() override;
  // One turn of the loop: timers, sends that are due, then waits (at most until `wake_by`, the next
  // timer or the next due send) for something to read or write and handles it. With
  // `until_delivery`, stops reading at the first message delivered to an inbox, so that a caller
  // gets (and can forward) each ring piece while the next one is still arriving.
  void step(Clock::time_point wake_by, bool until_delivery = false);
  // Handles queued commands and sends what is due, without waiting (a caller's send()).
  void pump();
  bool stopping() const { return stop_; }
  // Copies views, member status and counters to the transport for other threads, when they changed.
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
  const Membership& membership() const { return driver_->membership(); }

  // Socket set-up (zmq_socket_setup.cc).
  // A DEALER connected to `address`, authenticating `server_name`'s roster key in secure mode. With
  // `monitor`, the connection is watched from before it is opened (zmq_connection_watch.cc). When
  // libzmq refuses to connect to the address, nothing is opened: the refusal is logged and counted
  // against `server_name` (RejectCause::kAddress) and nullopt returned, so that no address a peer
  // supplies can fail the transport.
  std::optional<zmq::socket_t> open_dealer(const std::string& address, const std::string& server_name,
                                           std::unique_ptr<ZmqSocketMonitor>* monitor = nullptr);
  void open_bootstraps();
  // Where to dial site `name`, which announced `announced`: in secure mode the roster's address for it
  // when the roster lists one (a peer cannot redirect this site elsewhere), otherwise `announced`.
  const std::string& dial_address(const std::string& name, const std::string& announced) const;

  // Outbound links (zmq_outbound_links.cc).
  Link* ensure_link(const std::string& name);
  void close_link(const std::string& name);
  void enqueue(Link& link, const std::string& to, Message&& msg, Clock::time_point now);
  void enqueue_membership(Link& link, const std::string& to, MessageKind kind, std::string body, Clock::time_point now);
  void handle_send(std::string to, Message msg);
  void handle_leave(std::chrono::milliseconds linger);
  // Hands what is due to libzmq, as far as the send rate cap lets it; returns whether a link is blocked.
  bool flush(Clock::time_point now);
  // When the first message queued on `link` (not empty) may leave: its due time, or later when the send
  // rate cap holds it.
  Clock::time_point next_send_time(const Link& link) const;

  // Link shaping (zmq_link_shaping.cc). When a message of `kind` and `bytes` to `to` handed to its link
  // `now` is delivered, or nullopt when the emulation loses it (mixer kinds only) or a partition cuts
  // the link. Reports what the emulation scheduled to on_emulated_send.
  std::optional<Clock::time_point> due_time(const std::string& to, MessageKind kind, std::size_t bytes,
                                            Clock::time_point now);
  // Whether an emulated partition cuts this site from `to` now.
  bool cut_off(const std::string& to, Clock::time_point now) const;

  // Frame receiving (zmq_frame_receiver.cc): reads one message from the ROUTER, if any.
  bool receive_one();
  // Secure mode: the roster entry of the key a received message's connection authenticated with
  // (the ZAP handler's User-Id, peer/zmq/zap_handler.h), or nullptr when the roster in force no longer
  // lists that key; notes the connection's key for cut_stale_connections().
  const Roster::Entry* sender_of(const zmq::message_t& header, const char* key);
  // Closes every accepted connection whose key the roster in force no longer lists (removed, or
  // replaced by a new key for its name). libzmq has no call to close one connection of a ROUTER: its
  // descriptor is shut down, which libzmq sees as the peer closing it; the pipe and what waits in it
  // go with it, and a reconnection with that key is refused at the handshake.
  void cut_stale_connections();
  void reject(RejectCause cause, const std::string& peer, const std::string& detail);
  // Federation terms (zmq_frame_receiver.cc): answers a hello from `name` whose terms differ from ours
  // with a refusing hello on a connection of its own, and counts the refusal.
  void refuse(const std::string& name, const HelloInfo& hello, const TermsMismatch& mismatch);
  // A refusing hello arrived from `from`: logs and keeps the first reason for ZmqTransport::refusal()
  // when `from` is a site this one joins through (secure mode), else counts it (kStrayRefusal).
  void refused_by(const std::string& from, const std::string& reason);

  // Sink and forward (zmq_sink_forward.cc): a validated mixer message from `name`.
  void receive_mixer(const std::string& name, const WireHeader& h, std::size_t payload_bytes);
  void relay(const PayloadSink::Relay& r, zmq::message_t&& frame, std::size_t elements);

  // Roster changes (zmq_membership_port.cc): the roster in force becomes `roster`; sites it no longer
  // lists (or lists with another key) are expelled (ZmqTransport::set_roster).
  void replace_roster(const Roster& roster);
  // Connection diagnostics (zmq_connection_watch.cc): the socket monitors of the bootstrap links
  // (why a joining site is not admitted: nobody listening, its key refused, security that differs)
  // and, in secure mode, of the listening socket (connections without CURVE, counted as rejections).
  std::unique_ptr<ZmqSocketMonitor> watch(zmq::socket_t& dealer);
  void watch_listener();
  void read_connection_events();
  void bootstrap_event(Bootstrap& b, const ZmqSocketMonitor::Event& e);
  void listener_event(const ZmqSocketMonitor::Event& e);

  // The loop (zmq_io_loop.cc).
  void drain_commands();
  void deliver(Message&& msg);
  // `own`: this process runs the round (it sends in it), as opposed to a resumed checkpoint's round.
  void advance_round(std::uint64_t round, bool own = true);

  // MembershipPort (zmq_membership_port.cc).
  void send_membership(const std::string& to, MessageKind kind, std::string body, Clock::time_point now) override;
  void member_restarted(const std::string& name) override;
  void member_joined(const std::string& name) override;
  void member_gone(const std::string& name, bool died) override;
  void adopt_bootstraps() override;
  void greet_bootstraps(const std::string& hello, Clock::time_point now) override;
  void membership_changed() override;

  ZmqTransport& t_;
  const ZmqTransportOptions& opt_;
  zmq::context_t ctx_;
  std::optional<ZapHandler> zap_;
  zmq::socket_t router_;
  std::optional<MembershipDriver> driver_;  // set once the listening address is known
  MessageValidator validator_;
  Reassembler reassembler_;
  std::map<std::string, Link> links_;
  std::vector<Bootstrap> bootstraps_;
  // Connections that only carry refusals to sites refused at join (never members), by name.
  std::map<std::string, Link> refusal_links_;
  std::map<std::string, std::string> connection_names_;  // insecure mode: routing id -> hello name
  std::uint64_t next_message_id_ = 1;
  // Partition windows count from here: the transport's start, or the origin it was given, on this
  // (steady) clock; nullopt while a deferred clock has not started (nothing is cut).
  std::optional<Clock::time_point> partition_origin_ =
      opt_.partition_clock_deferred ? std::nullopt
      : opt_.partition_origin
          ? std::optional(Clock::now() - std::chrono::duration_cast<Clock::duration>(std::chrono::system_clock::now() -
                                                                                     *opt_.partition_origin))
          : std::optional(Clock::now());
  // --max-send-rate over everything sent (nullopt: no cap), and the link that sent last under it: the
  // next flush starts after it, so that links take turns.
  std::optional<SendRateLimit> send_limit_ =
      opt_.max_send_bits_per_s > 0
          ? std::optional<SendRateLimit>(std::in_place, opt_.max_send_bits_per_s,
                                         SendRateLimit::default_burst_bytes(opt_.max_send_bits_per_s), Clock::now())
          : std::nullopt;
  std::string capped_last_;
  bool stop_ = false;
  bool dirty_ = true;
  TransportStats stats_;
  LinkEmulator emulator_;
  std::optional<std::size_t> region_;  // this site's region in the WAN model
  std::set<std::string> unknown_region_logged_;
  struct PeerBytes {
    std::uint64_t in = 0, out = 0;
  };
  std::map<std::string, PeerBytes> traffic_;
  bool delivered_ = false;  // deliver() ran (or a message was sunk) since step() began
  const PayloadSink* sink_ = nullptr;
  std::optional<Message> sunk_;
  zmq::message_t rid_, hdr_, pay_, extra_;  // reused receive frames
  std::vector<zmq::pollitem_t> items_;
  // Secure mode: the listening socket's monitor, the peer hosts of connections it accepted (by
  // descriptor, until closed), and whether a handshake without CURVE failed and awaits its close.
  std::unique_ptr<ZmqSocketMonitor> listener_monitor_;
  std::map<int, std::string> accepted_;
  // Secure mode: the key each accepted connection authenticated with and its peer's ip:port, by
  // descriptor, from the messages received on it (ZMQ_SRCFD); forgotten when it closes.
  struct Incoming {
    std::string key;
    std::string peer;
  };
  std::map<int, Incoming> incoming_;
  bool plaintext_pending_ = false;
};

}  // namespace meridian::peer
