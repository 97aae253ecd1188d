// A site of a federation on the in-memory network (peer/in_memory_transport.h): the
// FederationTransport of peer/federation_transport.h for in-process multi-site tests and simulation.
// Membership runs the same protocol as over TCP, driven by the same code (peer/membership_driver.h):
// a new member greets its bootstrap sites, members gossip their tables, heartbeats detect deaths
// (InMemoryNetwork::kill() is a crash), leave() is announced, and views are proposed and agreed on
// as peer/membership.h says. Membership messages carry the same encoded bodies as on the wire. Federation
// terms are checked at join as on TCP: a site whose hello carries other terms is refused, counted
// (RejectCause::kTerms) and told why in a refusing hello, which its refusal() then returns.
//
// Every received message passes the checks ZmqTransport makes once it is decoded, with the same
// counters: the message validator (peer/message_validator.h: model fingerprint, tensor length, push-sum
// weight, round window, replay), finite payload values, and membership's admission (a message from a
// site that is not a member is refused). Each message travels whole, as one chunk would, with its
// sender's model fingerprint. Unlike ZmqTransport it emulates no WAN and no partitions, encrypts nothing
// and decodes no frames: the network names every sender truthfully. Byte counts are bodies plus payloads.
//
// Threads: one internal thread per member reads its mail and runs the membership timers; every
// public method is thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "peer/adaptive_deadline.h"
#include "peer/federation_terms.h"
#include "peer/federation_transport.h"
#include "peer/in_memory_transport.h"
#include "peer/membership_driver.h"
#include "peer/message_validator.h"

namespace meridian::peer {

struct InMemoryFederationOptions {
  std::string name;                    // this site's name (is_valid_site_name)
  std::string region;                  // announced in hello and member info
  std::vector<std::string> bootstrap;  // names of sites to contact first
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
  std::uint64_t incarnation = 0;  // 0: milliseconds since the epoch (a rejoin outlives old records)
  // Announced in every hello; a peer whose hello carries other terms is refused. Empty: not checked.
  FederationTerms terms;
  // What a received message must satisfy, as ZmqTransportOptions::validation; model_fingerprint is also
  // stamped on every message this site sends.
  ValidationPolicy validation;
};

class InMemoryFederation final : public FederationTransport, private MembershipPort {
 public:
  // Joins `network` as site `options.name` and starts greeting the bootstrap sites. Throws
  // error::UserError for a bad name or timing (naming it) or when another member already serves
  // that name; a name that crashed or left may join again.
  InMemoryFederation(std::shared_ptr<InMemoryNetwork> network, InMemoryFederationOptions options);
  // Stops without announcing a leave (like a crash): peers declare this site dead after the timeout.
  ~InMemoryFederation() override;

  InMemoryFederation(const InMemoryFederation&) = delete;
  InMemoryFederation& operator=(const InMemoryFederation&) = delete;

  const std::string& self() const override { return options_.name; }
  // "tcp://NAME.in-memory.invalid:1": a site address (peer/site_address.h), as the wire codec wants
  // every announced address to be, on a reserved domain that resolves nowhere.
  const std::string& endpoint() const override { return endpoint_; }

  // Throws TransportError after leave(). A message to a site that is neither a live member nor one only
  // heard of (which a view may already list, as on TCP) is dropped and counted (dropped_unreachable); to
  // this site itself it is delivered here.
  void send(const std::string& to, Message msg) override;
  [[nodiscard]] std::optional<Message> receive(std::chrono::milliseconds timeout) override;
  [[nodiscard]] std::optional<Message> receive_control(std::chrono::milliseconds timeout) override;
  View view_for(std::uint64_t round) const override;

  void set_round(std::uint64_t round) override;
  void set_step_time(std::chrono::microseconds step) override;
  void resume_round(std::uint64_t round) override;
  // No partition emulation here: does nothing.
  void start_partition_clock() override {}
  // The leave reaches every live member at once, so `linger` is not needed.
  void leave(std::chrono::milliseconds linger = std::chrono::milliseconds(1000)) override;

  std::vector<MemberStatus> members() const override;
  std::vector<std::string> alive_members() const override;
  View latest_view() const override;
  std::optional<View> view_awaited(std::uint64_t round) const override;
  bool awaits_pace() const override;
  const RejectionCounters& rejections() const override { return rejections_; }
  TransportStats stats() const override;
  std::optional<std::string> refusal() const override;
  // The in-memory network has no connections to fail: always empty.
  std::vector<std::string> join_problems() const override { return {}; }

 private:
  using Clock = std::chrono::steady_clock;

  void run();
  void handle(Message msg, std::uint64_t model_fingerprint, Clock::time_point now);
  // The validator's and the payload's checks of a message from `from`, as ZmqTransport makes them on
  // its decoded header and while copying its payload; nullopt when it may be used.
  std::optional<Rejection> validate(const std::string& from, const Message& msg, std::uint64_t model_fingerprint) const;
  void stop_thread();
  void note_round(std::uint64_t round, bool own);
  std::optional<Message> take(std::deque<Message>& box, std::chrono::milliseconds timeout);
  void deliver_locally(Message msg);
  // A hello from `from` whose terms differ from ours: counted, and answered with a refusing hello.
  void refuse_terms(const std::string& from, const TermsMismatch& mismatch);
  void throw_if_stopped() const;

  // MembershipPort: called by the driver with mu_ held.
  void send_membership(const std::string& to, MessageKind kind, std::string body, Clock::time_point now) override;
  void member_restarted(const std::string& name) override { contacted_.erase(name); }
  // A site that joins (or left and came back) starts afresh, as its replay records do on TCP.
  void member_joined(const std::string& name) override { validator_.forget(name); }
  void member_gone(const std::string& name, bool died) override;
  void adopt_bootstraps() override;
  void greet_bootstraps(const std::string& hello, Clock::time_point now) override;
  void membership_changed() override {}
  void post(const std::string& to, Message msg);

  std::shared_ptr<InMemoryNetwork> net_;
  InMemoryFederationOptions options_;
  std::string endpoint_;
  RejectionCounters rejections_;

  // Guards everything below; taken before the network's own lock, never after it.
  mutable std::mutex mu_;
  std::condition_variable arrived_;
  std::optional<MembershipDriver> driver_;
  MessageValidator validator_;
  std::deque<Message> inbox_;
  std::deque<Message> control_inbox_;
  std::vector<std::string> bootstraps_;  // not yet known as live members
  std::set<std::string> contacted_;      // members this site has sent to since they joined
  struct PeerBytes {
    std::uint64_t in = 0, out = 0;
  };
  std::map<std::string, PeerBytes> traffic_;
  TransportStats stats_;
  std::optional<std::string> refusal_;  // the first refusal a peer sent (refusal())
  bool stopped_ = false;

  std::atomic<bool> stop_thread_{false};
  std::thread thread_;
};

}  // namespace meridian::peer
