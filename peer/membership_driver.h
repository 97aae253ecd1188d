// Drives the membership state machine (peer/membership.h) over any transport: turns received
// membership messages into its inputs, runs its timers (heartbeats, anti-entropy gossip of the member
// table, probes of members declared dead, hellos to bootstrap sites), and turns its changes into
// membership messages and connection changes. The ZeroMQ transport (peer/zmq/zmq_transport.h) and the
// in-memory federation (peer/in_memory_federation.h) both use it, so that membership behaves the same
// on TCP and in-process; what differs between them (connections, bootstrap addresses, per-peer
// reception state) sits behind MembershipPort.
//
// Messages carry the bodies of peer/wire_codec.h (encode_hello, encode_members, ...) in Message::body.
//
// Thread-safety: none. One thread at a time (the transport's loop) calls the driver, and the driver
// calls its port only from inside its own methods.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <string_view>

#include "peer/adaptive_deadline.h"
#include "peer/membership.h"
#include "peer/message.h"
#include "peer/wire_codec.h"

namespace meridian::peer {

// What the driver needs from the transport under it.
class MembershipPort {
 public:
  using Clock = std::chrono::steady_clock;
  virtual ~MembershipPort() = default;

  // Sends a membership message of `kind` with `body` to member `to`, opening a connection to it first
  // when there is none (a new connection starts with this site's hello). Does nothing when `to` cannot
  // be reached (no address, not admissible, cut off).
  virtual void send_membership(const std::string& to, MessageKind kind, std::string body, Clock::time_point now) = 0;
  // `name` came back with a new incarnation while its old one still counted as alive: whatever is queued
  // for the old process, and its connection, go.
  virtual void member_restarted(const std::string& name) = 0;
  // `name` became alive (the driver's membership() has its record): a connection to an old address
  // goes, and per-peer reception state (partial messages, replay records) starts afresh.
  virtual void member_joined(const std::string& name) = 0;
  // `name` was declared dead (`died`) or left: its connection goes; for a death, its per-peer reception
  // state too (a leaving site's last messages may still be on their way).
  virtual void member_gone(const std::string& name, bool died) = 0;
  // A bootstrap site now known as a live member stops being greeted as a bootstrap (its connection
  // may become that member's). Called after every hello and whenever members joined.
  virtual void adopt_bootstraps() = 0;
  // Once per heartbeat interval: sends `hello` (an encoded HelloInfo) to every bootstrap site not yet
  // known as a member.
  virtual void greet_bootstraps(const std::string& hello, Clock::time_point now) = 0;
  // The member table or the views changed (after the hooks above ran for the change).
  virtual void membership_changed() = 0;
};

struct MembershipTiming {
  std::chrono::milliseconds heartbeat_interval{500};
  std::chrono::milliseconds heartbeat_timeout{3000};
  // --heartbeat-timeout auto: the timeout follows the measured gaps between the heartbeats of live
  // members (peer/adaptive_deadline.h); the driver feeds it every gap shorter than the timeout in force
  // and sets the membership's timeout from it each tick (never down to the interval). Null: fixed.
  std::shared_ptr<AdaptiveDeadline> adaptive_timeout;
};

class MembershipDriver {
 public:
  using Clock = std::chrono::steady_clock;

  // `port` must outlive the driver. The first tick is due at `now`.
  MembershipDriver(MembershipConfig config, MembershipTiming timing, MembershipPort& port, Clock::time_point now);

  const Membership& membership() const { return membership_; }

  // A hello from `hello.name` (the transport has checked that the connection is that site's).
  // Returns the first part Membership refused (kImplausibleRound for its round, say), its detail
  // counting the others, when it refused any; the rest of the hello was taken then.
  std::optional<Rejection> on_hello(const HelloInfo& hello, Clock::time_point now);
  // A members, heartbeat or leave message from `from`. Returns the rejection (kMalformed) when its body
  // does not decode, or (kUnknownKind) for another kind; nothing changed then. Returns the first of
  // the parts Membership refused (kUnvouched, kIncarnation, kInventedMember), its detail counting the
  // others, when it refused any; the rest of the message was taken then.
  std::optional<Rejection> on_message(const std::string& from, MessageKind kind, std::string_view body,
                                      Clock::time_point now);
  // Whether a control or mixer message from `from` is taken: control only from a live member; mixer
  // messages also from a member that left gracefully (its last messages precede its leave on its own
  // connection, but the news of the leave may overtake them through another site). A taken message
  // counts as contact with `from`; a refused one from a member declared dead hints it to refute.
  std::optional<Rejection> admit(const std::string& from, MessageKind kind, Clock::time_point now);

  // Runs what is due at `now`: the heartbeat tick and a pending gossip of the changed member table.
  void on_timer(Clock::time_point now);
  // When on_timer() next has something to do.
  Clock::time_point next_due() const;

  // Notes a round: `own` when this process runs it (it sends in it), not when it is a resumed
  // checkpoint's. Returns true when the round is newer than every round noted before.
  bool note_round(std::uint64_t round, bool own);

  // Marks this site as leaving and sends a leave to every live member.
  void leave(Clock::time_point now);
  // `name` was taken out of the roster: it leaves the membership (Membership::expel), its connection
  // goes, and the member table with its new record is gossiped.
  void expel(const std::string& name, Clock::time_point now);

  // This site's compute time of a training step (waits excluded), shared in its heartbeats for
  // automatic shapes (peer/pace.h); zero: not measured.
  void set_step_time(std::chrono::microseconds step) { step_us_ = static_cast<std::uint64_t>(step.count()); }

  // Round-trip time to `name` measured by heartbeat echoes (smoothed), nullopt until measured.
  std::optional<std::chrono::microseconds> rtt(const std::string& name) const;

 private:
  void tick(Clock::time_point now);
  void gossip_all(Clock::time_point now);
  void process(const MembershipChange& change, Clock::time_point now);
  void maybe_refute_hint(const std::string& name, Clock::time_point now);
  // The rejection to count for what `change` refused (the first part, counting the rest), if any.
  static std::optional<Rejection> first_refusal(const MembershipChange& change);
  void send_table(const std::string& to, Clock::time_point now);

  std::string self_;
  MembershipTiming timing_;
  MembershipPort& port_;
  Membership membership_;
  std::uint64_t round_ = 0;
  std::uint64_t step_us_ = 0;
  Clock::time_point next_tick_;
  Clock::time_point last_gossip_all_;
  Clock::time_point next_probe_;  // when dead members next hear our table
  bool gossip_due_ = false;
  std::map<std::string, Clock::time_point> hinted_;  // last refutation hint sent to a "dead" member
  struct Echo {
    std::uint64_t sent_us = 0;     // newest sent_us from this peer
    Clock::time_point received{};  // when it arrived
    std::optional<double> rtt_us;  // smoothed round-trip time
  };
  std::map<std::string, Echo> echoes_;
  std::mt19937_64 rng_{std::random_device{}()};
};

}  // namespace meridian::peer
