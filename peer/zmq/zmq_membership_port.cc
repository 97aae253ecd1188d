// What the membership driver's decisions (peer/membership_driver.h) do to the ZeroMQ transport:
// membership messages go out on per-peer links, a member that restarted, moved, died or left loses
// its connection and per-peer state, and a bootstrap connection becomes a member's link once the
// bootstrap site is known by name.
#include <spdlog/spdlog.h>

#include "peer/zmq/zmq_io_loop.h"

namespace meridian::peer {

void ZmqTransport::IoLoop::send_membership(const std::string& to, MessageKind kind, std::string body,
                                           Clock::time_point now) {
  if (Link* link = ensure_link(to)) enqueue_membership(*link, to, kind, std::move(body), now);
}

void ZmqTransport::IoLoop::member_restarted(const std::string& name) { close_link(name); }

void ZmqTransport::IoLoop::member_joined(const std::string& name) {
  const auto* record = membership().find(name);
  if (auto it = links_.find(name);
      it != links_.end() && record && it->second.address != dial_address(name, record->address))
    close_link(name);  // a new incarnation heard of through gossip, listening at a new address
  // A site that left and came back starts afresh (its partial message and replay records were kept
  // across its leave for the messages still on their way, see MembershipDriver::admit).
  reassembler_.forget(name);
  validator_.forget(name);
}

void ZmqTransport::IoLoop::member_gone(const std::string& name, bool died) {
  close_link(name);
  emulator_.forget(name);
  if (died) {
    reassembler_.forget(name);
    validator_.forget(name);
  }
}

void ZmqTransport::IoLoop::adopt_bootstraps() {
  for (auto it = bootstraps_.begin(); it != bootstraps_.end();) {
    std::string found;
    for (const auto& r : membership().alive_others())
      if ((!it->name.empty() && r.name == it->name) || (it->name.empty() && r.address == it->link.address))
        found = r.name;
    if (found.empty()) {
      ++it;
      continue;
    }
    // Stop watching while the socket is certainly open (the link may close with the bootstrap).
    it->monitor.reset();
    // Keep the bootstrap connection as this member's link when it has none: one connection per peer.
    if (!links_.contains(found)) links_.emplace(found, std::move(it->link));
    it = bootstraps_.erase(it);
    dirty_ = true;
  }
}

void ZmqTransport::IoLoop::greet_bootstraps(const std::string& hello, Clock::time_point now) {
  for (auto& b : bootstraps_) enqueue_membership(b.link, b.name, MessageKind::kHello, hello, now);
}

void ZmqTransport::IoLoop::membership_changed() { dirty_ = true; }

void ZmqTransport::IoLoop::replace_roster(const Roster& roster) {
  std::vector<std::string> expelled, moved;
  for (const auto& e : opt_.roster->entries()) {
    const auto* kept = roster.by_name(e.name);
    if (!kept || kept->public_key != e.public_key) expelled.push_back(e.name);
    else if (kept->address != e.address) moved.push_back(e.name);
  }
  // In place: the ZAP handler and the membership's admissibility check refer to this object, so both
  // follow the new roster from the next connection and the next message on.
  *t_.options_.roster = roster;
  // Connections opened with a key the roster no longer lists close now, not when their peer next
  // speaks (whatever arrives on them before is refused by key, zmq_frame_receiver.cc).
  cut_stale_connections();
  // The roster's address wins over an announced one: a link dialed elsewhere is opened again there.
  for (const auto& name : moved) close_link(name);
  const auto now = Clock::now();
  for (const auto& name : expelled) {
    spdlog::info("'{}': '{}' is no longer in the roster: its key is refused from now on", opt_.name, name);
    std::erase_if(bootstraps_, [&](const Bootstrap& b) { return b.name == name; });
    refusal_links_.erase(name);
    driver_->expel(name, now);
    close_link(name);
    reassembler_.forget(name);
    validator_.forget(name);
  }
  dirty_ = true;
}

}  // namespace meridian::peer
