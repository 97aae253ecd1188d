// The transport as a site of a federation sees it: peer::Transport (what gossip/ uses) plus
// membership, views, rounds, control messages and the site's lifecycle. A site daemon needs only this
// interface, so a whole site can run on TCP (peer/zmq/zmq_transport.h) or in-process on the in-memory
// network (peer/in_memory_federation.h). Both drive membership with the same code
// (peer/membership_driver.h).
//
// Errors: as peer/transport.h. Thread-safety: every method may be called from any thread
// concurrently (status displays and metrics read while the communication thread sends and receives).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "error/error.h"
#include "peer/membership_messages.h"
#include "peer/rejection.h"
#include "peer/roster.h"
#include "peer/transport.h"

namespace meridian::peer {

// What a site knows about one member, for status displays and tests.
struct MemberStatus {
  MemberRecord record;
  bool connected = false;  // this site has an outgoing connection to it
  // Round-trip time from heartbeats (smoothed, including any emulated WAN delay); nullopt until
  // measured. Bytes this site sent to it and received from it (headers and payloads).
  std::optional<std::chrono::microseconds> rtt;
  std::uint64_t bytes_out = 0;
  std::uint64_t bytes_in = 0;
  // When anything last arrived from it (peer/membership.h); nullopt for this site itself.
  std::optional<std::chrono::steady_clock::time_point> last_heard;
};

struct TransportStats {
  std::uint64_t messages_sent = 0;      // whole messages handed to the network
  std::uint64_t bytes_sent = 0;         // header + payload bytes
  std::uint64_t messages_received = 0;  // whole messages accepted (all kinds)
  std::uint64_t bytes_received = 0;
  std::uint64_t dropped_unreachable = 0;  // sends to unknown, dead or departed peers
  std::uint64_t emulated_lost = 0;        // messages the WAN emulation dropped
  std::uint64_t zap_admitted = 0;
  std::uint64_t zap_denied = 0;
};

class FederationTransport : public Transport {
 public:
  // The address peers reach this site at (for ZeroMQ the advertised or bound endpoint).
  virtual const std::string& endpoint() const = 0;

  // The next received kControl message (they do not go through receive()), or nullopt when `timeout`
  // passes first. Throws TransportError once stopped and drained.
  [[nodiscard]] virtual std::optional<Message> receive_control(std::chrono::milliseconds timeout) = 0;

  // The site's current round: moves the accepted round window and the effective round of views this
  // site proposes. Rounds of sent mixer messages advance it too.
  virtual void set_round(std::uint64_t round) = 0;
  // Like set_round for a round an earlier process of this site ran (a resumed checkpoint): it moves the
  // round window and proposals, but this process has not run it, so a conflicting view proposal for a
  // round at or before it may still replace this site's own (peer/membership.h).
  virtual void resume_round(std::uint64_t round) = 0;
  // This site's compute time of a training step, waits for the network excluded (the daemon measures
  // it): shared with the members for automatic shapes (peer/pace.h). Zero: not measured.
  virtual void set_step_time(std::chrono::microseconds step) = 0;
  // Starts the clock of emulated partitions when it was deferred to the run's first round; otherwise
  // (or without partition emulation) does nothing.
  virtual void start_partition_clock() = 0;

  // Announces a graceful leave to every live member, waits (at most `linger`) for it to go out, and
  // stops. Afterwards send() and receive() throw TransportError. Does nothing when already stopped.
  virtual void leave(std::chrono::milliseconds linger = std::chrono::milliseconds(1000)) = 0;

  // Every member this site has a record of, this site included.
  virtual std::vector<MemberStatus> members() const = 0;
  // Live members' names, sorted, including this site.
  virtual std::vector<std::string> alive_members() const = 0;
  // The newest view in force here (peer/membership.h), whatever its effective round.
  virtual View latest_view() const = 0;
  // A view this site holds that round `round` should run in but that is not in force yet
  // (Membership::view_awaited): its members may run the round in it as soon as they all hold it. A
  // round that a view awaits waits for it (daemon/federation/round_view.h) before it takes view_for(round).
  virtual std::optional<View> view_awaited(std::uint64_t round) const = 0;
  // Whether the newest view awaits the amendment that gives it a measured pace before anyone runs it
  // (peer/membership.h, Membership::awaits_pace): a site about to start on it waits for that one.
  virtual bool awaits_pace() const = 0;
  // Incoming messages refused, by cause.
  virtual const RejectionCounters& rejections() const = 0;
  virtual TransportStats stats() const = 0;
  // The first refusal a site this one joins through (a bootstrap) sent because their federation terms
  // differ ("alpha refuses this site: ..."), nullopt while none came. A refused site is never admitted
  // by that peer: its caller should stop and show the reason. A refusal from any other site is only
  // counted (RejectCause::kStrayRefusal): one member must not be able to stop a site that joins others.
  virtual std::optional<std::string> refusal() const = 0;

  // Replaces the roster of a secure site while it runs (an operator added or removed a site). From then
  // on only the new roster's keys are admitted. A site no longer listed (or listed with another key)
  // is expelled: its messages are dropped and counted (RejectCause::kUnknownSender), the connection
  // to it closes, its record becomes "left" (gossiped, so the others learn it too) and the next view
  // leaves it out. A site added can connect and join from then on (one refused before must connect
  // anew: libzmq does not retry a connection that authentication refused). Takes effect on the
  // transport's loop shortly after the call returns.
  // Throws error::UserError when the transport has no roster (insecure mode, the in-memory network)
  // or `roster` lacks this site or lists another key for it; the roster in force is unchanged then.
  virtual void set_roster(const Roster& roster) {
    (void)roster;
    throw error::UserError("site '" + self() + "' has no roster to change (it runs without CURVE authentication)");
  }

  // Why this site has not reached the sites it joins through (its bootstrap addresses), one line each
  // for people: nobody listening there, this site's key refused, security that differs. Empty while
  // nothing is known, and once those sites are members.
  virtual std::vector<std::string> join_problems() const = 0;
  // The sites this site joins through whose handshake refused its key (their roster lacks it, or lists
  // another key for it), by name, sorted; empty while none did, and on transports without keys.
  virtual std::vector<std::string> refused_by() const { return {}; }
};

}  // namespace meridian::peer
