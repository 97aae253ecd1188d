// The ZeroMQ transport: peer::Transport over TCP between sites, with CurveZMQ encryption and roster
// authentication, the wire codec, validation of every incoming message, and membership (bootstrap,
// member-list gossip, heartbeats, graceful leave, views).
//
// Sockets: each site binds one ROUTER (incoming traffic) and opens one DEALER per peer (outgoing), so
// every pair of sites talks over two one-way connections and per-peer FIFO order holds. Every new
// connection starts with a Hello. In secure mode (the default) the ROUTER is a CURVE server whose ZAP
// handler admits only roster keys and names each connection after its roster entry; DEALERs are CURVE
// clients that authenticate the peer's roster key. In insecure mode (plain TCP, local experiments only)
// senders are known by the name in the Hello of their connection.
//
// Threads: one loop owns every socket (libzmq sockets are single-threaded) and whichever thread holds
// its mutex runs it. Normally that is the transport's internal I/O thread; but a thread that calls
// send() or receive() runs the loop itself for as long as it keeps calling (a short lease), so that a
// collective's messages go between the caller and libzmq without waking a third thread each time (on
// a busy machine every wake-up waits for a core). With WAN emulation on, the I/O thread alone runs the
// loop, to keep the emulated delivery times exact. send(), receive(), view_for() and the other public
// methods are thread-safe: they hand work over through a queue (woken by an eventfd) when another
// thread runs the loop, and read results under a mutex.
// Outgoing messages wait in a per-peer FIFO queue until the time the WAN emulation
// (peer/link_emulator.h) says the link delivers them (at once without emulation); the I/O loop polls
// no longer than until the earliest one is due. An error on the I/O thread is stored and rethrown as TransportError by
// the next send() or receive().
//
// It implements peer/federation_transport.h; membership is driven by peer/membership_driver.h. The
// implementation is split by concept over peer/zmq_*.cc, listed in peer/zmq/zmq_io_loop.h.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "peer/adaptive_deadline.h"
#include "peer/buffer_pool.h"
#include "peer/curve_keys.h"
#include "peer/federation_transport.h"
#include "peer/wan_model.h"
#include "peer/membership_messages.h"
#include "peer/message_validator.h"
#include "peer/partition_schedule.h"
#include "peer/rejection.h"
#include "peer/roster.h"
#include "peer/transport.h"
#include "peer/wire_codec.h"

namespace meridian::peer {

// One message the WAN emulation scheduled (see ZmqTransportOptions::on_emulated_send).
struct EmulatedSend {
  std::string to;                                  // the destination site
  MessageKind kind = MessageKind::kPushSum;        // membership traffic is emulated too
  std::size_t bytes = 0;                           // on the emulated link: headers and payloads of all its chunks
  std::chrono::steady_clock::time_point enqueued;  // when it was handed to the emulated link
  std::chrono::steady_clock::time_point due;       // when the link delivers it: it is really sent then
};

struct ZmqTransportOptions {
  std::string name;                          // this site's name (in secure mode: its roster entry)
  std::string listen = "tcp://127.0.0.1:*";  // ROUTER bind address; '*' or port 0 picks a free port
  std::string advertise;                     // address peers connect to; empty: the bound endpoint
                                             // (required when listening on 0.0.0.0 or [::])
  std::string region;                        // WAN region announced in hello and member info
  // WAN emulation on this site's send path (peer/wan_model.h, e.g. parse_wan_spec("world4")): every
  // message to a peer leaves when the emulated link delivers it. With a multi-region model, `region`
  // must be one of its regions and peers' links follow the regions they announce. Loss applies to
  // mixer messages only: membership traffic is delayed like the rest but never dropped, as a TCP
  // stream would deliver it.
  WanModel wan;
  std::uint64_t wan_seed = 0;  // jitter and loss draws (mixed with the site name)
  // Emulated partitions (peer/partition_schedule.h): while a window cuts this site from a peer, every
  // message to it (membership included) is dropped and counted in emulated_lost. Times count from
  // `partition_origin` (a wall-clock moment, so that sites started apart cut at the same moment), or
  // from this transport's start when it is not set.
  PartitionSchedule partitions;
  std::optional<std::chrono::system_clock::time_point> partition_origin;
  // Windows count from start_partition_clock() instead (no cut before it): the daemon calls it at the
  // run's first round, which every site of a run starts at together.
  bool partition_clock_deferred = false;
  // Called for every message the WAN emulation schedules for delivery (not for those it loses, nor
  // for messages that travel unemulated: without a WAN model, across no link yet, or to a peer whose
  // region the model lacks), in the order they enter each link. Lets tests check the emulated
  // schedule itself rather than measure elapsed time. Runs on the I/O thread inside the transport's
  // loop: it must be quick and must not call the transport. Empty: nothing is called.
  std::function<void(const EmulatedSend&)> on_emulated_send;
  // Sites to contact first: "tcp://host:port" or "NAME@tcp://host:port". In secure mode a bare
  // address must match a roster entry's address (the peer's key is needed to connect).
  std::vector<std::string> bootstrap;
  bool insecure = false;             // plain TCP, no authentication (logs a warning)
  std::optional<CurveKeyPair> keys;  // required unless insecure
  std::optional<Roster> roster;      // required unless insecure
  std::chrono::milliseconds heartbeat_interval{500};
  std::chrono::milliseconds heartbeat_timeout{3000};
  // --heartbeat-timeout auto (peer/membership_driver.h, MembershipTiming): the timeout follows it, from
  // heartbeat_timeout on. Null: heartbeat_timeout stays.
  std::shared_ptr<AdaptiveDeadline> heartbeat_deadline;
  std::uint64_t view_lead_rounds = 8;
  // Views carry the federation's pace for automatic shapes (peer/membership.h, agree_pace).
  bool agree_pace = false;
  // At least this long between two views taken while running that list a site not heard from
  // (peer/membership.h, MembershipConfig::hearsay_view_interval).
  std::chrono::milliseconds hearsay_view_interval{50000};
  std::uint64_t incarnation = 0;  // 0: milliseconds since the epoch (restarts outlive old records)
  ValidationPolicy validation;
  // What must be equal across the federation (peer/federation_terms.h), announced in every hello. A
  // peer whose hello carries other terms is refused: it hears the reason in a refusing hello, the
  // refusal is counted (RejectCause::kTerms), and it never becomes a member. Empty: not checked.
  FederationTerms terms;
  WireLimits limits;
  int send_high_water_mark = 8192;  // chunks queued in libzmq per peer before sends wait
  // A cap on everything this site sends, over all its links (peer/send_rate_limit.h), in bits per
  // second; 0: none. Messages wait in their link's queue until the cap lets them go, after the WAN
  // emulation's delivery time when that is on.
  double max_send_bits_per_s = 0;
  // Kernel socket buffer of each TCP connection, in bytes: SO_RCVBUF of the connections peers open to
  // this site (they only carry data in), SO_SNDBUF of the ones it opens to them (they only carry data
  // out). 0 keeps the OS default and its autotuning, which a WAN link needs: a fixed buffer caps a
  // connection at about buffer / round-trip time. A small buffer only pays where round trips are
  // tiny: on loopback 256 KiB keeps a sender at most that far ahead of its reader, so the reader copies
  // bytes still in cache instead of megabytes queued long enough to leave it (bench/allreduce.cc).
  int socket_buffer_bytes = 0;
  std::size_t pooled_buffers = 8;  // idle payload buffers kept for reuse
  // libzmq I/O threads (ZMQ_IO_THREADS). With two or more, the first serves the connections peers open
  // to this site (all receiving: reads, CURVE decryption) and the others the ones this site opens (all
  // sending), so a collective that receives and forwards at once does both copies in parallel instead
  // of one after the other on one thread; on loopback (bench/allreduce.cc, 10M floats, 4 processes)
  // that took a third off the ring all-reduce's time. 1 puts every connection on one thread.
  int io_threads = 2;
};

class ZmqTransport final : public FederationTransport {
 public:
  // Validates the options, binds, and starts the I/O thread (which contacts the bootstrap sites).
  // Throws error::UserError for bad options (naming the option) and TransportError when the
  // address cannot be bound.
  explicit ZmqTransport(ZmqTransportOptions options);
  // Stops the I/O thread without announcing a leave (like a crash, but tidy); pending sends are dropped.
  ~ZmqTransport() override;

  ZmqTransport(const ZmqTransport&) = delete;
  ZmqTransport& operator=(const ZmqTransport&) = delete;

  const std::string& self() const override { return options_.name; }
  // The address peers connect to (the advertised address, or the endpoint actually bound).
  const std::string& endpoint() const override { return endpoint_; }

  // Never blocks on the network. Throws TransportError after leave() or when the I/O thread failed.
  void send(const std::string& to, Message msg) override;
  // Received mixer messages wait in an unbounded inbox until taken here: the caller is expected to
  // keep up (mixers bound what is in flight). Mixer messages a site sent before its graceful leave are
  // delivered even when the news of the leave arrives first through another site. Throws
  // TransportError once stopped and drained.
  [[nodiscard]] std::optional<Message> receive(std::chrono::milliseconds timeout) override;
  // While the caller runs the loop itself (see Threads), a one-chunk message the sink accepts is
  // combined into it straight from libzmq's receive buffer, validated as usual, its finite-value check
  // fused with the combining; otherwise (the I/O thread received it, or it came in several chunks) the
  // payload arrives in a pooled buffer and is applied from there. A payload with a NaN or an infinity
  // is rejected and counted (kNonFinite) either way and never returned.
  [[nodiscard]] std::optional<Received> receive_into(const PayloadSink& sink,
                                                     std::chrono::milliseconds timeout) override;
  View view_for(std::uint64_t round) const override;

  // Received kControl messages (they do not go through receive()).
  [[nodiscard]] std::optional<Message> receive_control(std::chrono::milliseconds timeout) override;

  // Rounds, the partition clock and leave() as peer/federation_transport.h says.
  void set_round(std::uint64_t round) override;
  void set_step_time(std::chrono::microseconds step) override;
  void resume_round(std::uint64_t round) override;
  // Starts the partition windows' clock now when the options deferred it; otherwise does nothing.
  void start_partition_clock() override;
  void leave(std::chrono::milliseconds linger = std::chrono::milliseconds(1000)) override;

  // Payload buffers: take_buffer() reuses buffers that sent messages or recycle() gave back; giving
  // received payloads back with recycle() lets the transport receive into already-touched memory.
  std::vector<float> take_buffer(std::size_t elements) override { return pool_.take(elements); }
  void recycle(std::vector<float>&& payload) override { pool_.give(std::move(payload)); }

  std::vector<MemberStatus> members() const override;
  std::vector<std::string> alive_members() const override;  // sorted, including this site
  View latest_view() const override;
  std::optional<View> view_awaited(std::uint64_t round) const override;
  bool awaits_pace() const override;
  const RejectionCounters& rejections() const override { return rejections_; }
  TransportStats stats() const override;
  std::optional<std::string> refusal() const override;
  void set_roster(const Roster& roster) override;
  // From the socket monitors of the bootstrap connections (libzmq's connection and handshake events).
  std::vector<std::string> join_problems() const override;
  std::vector<std::string> refused_by() const override;

 private:
  class IoLoop;  // the loop's state: sockets, membership, queues (peer/zmq/zmq_io_loop.h)
  struct Command {
    enum class Type {
      kSend,
      kSetRound,
      kResumeRound,
      kSetStepTime,
      kStartPartitionClock,
      kLeave,
      kStop,
      kSetRoster
    } type;
    std::string to;
    Message msg;
    std::uint64_t round = 0;
    std::shared_ptr<const Roster> roster = nullptr;  // kSetRoster
  };

  void post(Command cmd);
  void rethrow_if_failed() const;
  std::optional<Received> take_from(std::deque<Message>& box, std::chrono::milliseconds timeout,
                                    const PayloadSink* sink);
  bool take_loop(std::unique_lock<std::mutex>& loop_lock);
  std::chrono::steady_clock::time_point lease_until() const;
  void extend_lease();
  void wake_io_thread();
  void loop_failed();

  // How long the I/O thread stays parked after a caller last ran the loop, and the longest a caller
  // polls in one turn (so that another thread's sends and the caller's deadline are seen in time).
  static constexpr std::chrono::milliseconds kCallerLease{20};
  static constexpr std::chrono::milliseconds kCallerSlice{50};

  ZmqTransportOptions options_;
  std::string endpoint_;
  BufferPool pool_;  // declared before the loop: sent payloads return here until libzmq is closed
  RejectionCounters rejections_;

  // Shared between the owner threads and the I/O thread.
  mutable std::mutex mu_;
  std::condition_variable arrived_;
  std::deque<Message> inbox_;
  std::deque<Message> control_inbox_;
  std::deque<Command> commands_;
  std::vector<View> views_;                  // copy of the membership's views in force, for view_for()
  std::vector<View> views_held_;             // copy of the membership's views, for view_awaited()
  bool awaits_pace_ = false;                 // copy of the membership's awaits_pace()
  std::vector<MemberStatus> member_status_;  // copy of the membership table, for members()
  std::exception_ptr failure_;
  std::optional<std::string> refusal_;      // the first refusal a peer sent (refusal())
  std::vector<std::string> join_problems_;  // copy of the bootstrap links' problems, for join_problems()
  std::vector<std::string> refused_by_;     // bootstrap sites that refused this site's key, for refused_by()
  bool stopped_ = false;
  int wake_fd_ = -1;  // eventfd: post() writes, the I/O thread polls
  TransportStats stats_;

  // The loop and who runs it (see Threads above). Lock order: loop_mu_ before mu_.
  std::mutex loop_mu_;
  std::condition_variable loop_cv_;           // the I/O thread parks here during a caller's lease
  std::atomic<std::int64_t> lease_until_{0};  // steady_clock ticks
  std::atomic<bool> caller_in_loop_{false};
  std::atomic<int> callers_waiting_{0};  // callers blocked on loop_mu_: the I/O thread parks
  std::atomic<bool> broken_{false};      // the loop threw on a caller's thread
  bool caller_driven_ = false;           // callers may run the loop (no WAN emulation)
  std::unique_ptr<IoLoop> loop_;
  std::thread thread_;
};

}  // namespace meridian::peer
