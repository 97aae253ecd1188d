#include "peer/membership_driver.h"

#include <algorithm>

#include <spdlog/spdlog.h>

namespace meridian::peer {

namespace {

std::uint64_t micros(MembershipDriver::Clock::time_point t) {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count());
}

}  // namespace

MembershipDriver::MembershipDriver(MembershipConfig config, MembershipTiming timing, MembershipPort& port,
                                   Clock::time_point now)
    : self_(config.self),
      timing_(timing),
      port_(port),
      membership_(std::move(config), now),
      next_tick_(now),
      last_gossip_all_(now - timing.heartbeat_interval),
      next_probe_(now) {}

void MembershipDriver::send_table(const std::string& to, Clock::time_point now) {
  port_.send_membership(to, MessageKind::kMembers, encode_members(membership_.snapshot()), now);
}

std::optional<Rejection> MembershipDriver::first_refusal(const MembershipChange& change) {
  if (change.refused.empty()) return std::nullopt;
  // The rest of the message was taken; the refusal is counted once for it, and says how much more.
  Rejection r{change.refused.front().cause, change.refused.front().detail};
  if (change.refused.size() > 1) r.detail += " (and " + std::to_string(change.refused.size() - 1) + " more refused)";
  return r;
}

std::optional<Rejection> MembershipDriver::on_hello(const HelloInfo& hello, Clock::time_point now) {
  const std::string& name = hello.name;
  const auto change = membership_.on_hello(hello, now);
  process(change, now);
  // Before answering: a bootstrap connection to this site then carries the answer instead of a new one.
  port_.adopt_bootstraps();
  if (membership_.is_alive(name)) send_table(name, now);
  else maybe_refute_hint(name, now);
  return first_refusal(change);
}

std::optional<Rejection> MembershipDriver::on_message(const std::string& from, MessageKind kind, std::string_view body,
                                                      Clock::time_point now) {
  MembershipChange change;
  switch (kind) {
    case MessageKind::kMembers: {
      auto list = decode_members(body);
      if (!list) return Rejection{RejectCause::kMalformed, "member list body is not a well-formed MemberList"};
      change = membership_.on_members(from, *list, now);
      membership_.heard_from(from, now);
      break;
    }
    case MessageKind::kHeartbeat: {
      auto hb = decode_heartbeat(body);
      if (!hb) return Rejection{RejectCause::kMalformed, "heartbeat body is not a well-formed Heartbeat"};
      change = membership_.on_heartbeat(from, *hb, now);
      auto& echo = echoes_[from];
      // A gap longer than the timeout in force was a death or a cut, not a sample of a live member.
      if (timing_.adaptive_timeout && echo.received != Clock::time_point{} && now - echo.received < timing_.heartbeat_timeout)
        timing_.adaptive_timeout->observe(std::chrono::duration_cast<std::chrono::microseconds>(now - echo.received));
      echo.sent_us = hb->sent_us;
      echo.received = now;
      // Only echoes of our own clock readings are meaningful; ignore anything from the future.
      const std::uint64_t now_us = micros(now);
      if (hb->echo_us != 0 && hb->echo_us + hb->held_us <= now_us) {
        const double sample = static_cast<double>(now_us - hb->echo_us - hb->held_us);
        echo.rtt_us = echo.rtt_us ? 0.8 * *echo.rtt_us + 0.2 * sample : sample;
      }
      break;
    }
    case MessageKind::kLeave: {
      auto lv = decode_leave(body);
      if (!lv) return Rejection{RejectCause::kMalformed, "leave body is not a well-formed Leave"};
      change = membership_.on_leave(from, *lv);
      break;
    }
    default: return Rejection{RejectCause::kUnknownKind, "not a members, heartbeat or leave message"};
  }
  if (const auto* r = membership_.find(from); r && r->state == MemberState::kDead) maybe_refute_hint(from, now);
  process(change, now);
  return first_refusal(change);
}

std::optional<Rejection> MembershipDriver::admit(const std::string& from, MessageKind kind, Clock::time_point now) {
  if (!membership_.is_alive(from)) {
    if (kind == MessageKind::kControl) return Rejection{RejectCause::kUnknownSender, "not a live member"};
    const auto* record = membership_.find(from);
    if (!(record && record->state == MemberState::kLeft)) {
      maybe_refute_hint(from, now);
      return Rejection{RejectCause::kUnknownSender, "mixer message from a site that is not a live member"};
    }
  }
  membership_.heard_from(from, now);
  return std::nullopt;
}

void MembershipDriver::maybe_refute_hint(const std::string& name, Clock::time_point now) {
  // A site we consider dead is talking to us: tell it (our table says so) so that it refutes with a
  // higher incarnation. At most once per heartbeat interval per site.
  const auto* r = membership_.find(name);
  if (!r || r->state != MemberState::kDead) return;
  auto& last = hinted_[name];
  if (now - last < timing_.heartbeat_interval) return;
  last = now;
  send_table(name, now);
}

void MembershipDriver::process(const MembershipChange& change, Clock::time_point now) {
  // A restarted site may listen elsewhere now, and what is still queued for it was meant for the dead
  // process: the old connection goes, and the joined handling below opens a new one with a hello.
  for (const auto& name : change.restarted) port_.member_restarted(name);
  for (const auto& name : change.joined) {
    port_.member_joined(name);
    spdlog::info("'{}': member '{}' is alive", self_, name);
    send_table(name, now);
  }
  for (const auto& name : change.died) {
    spdlog::info("'{}': member '{}' is dead (no heartbeat within the timeout)", self_, name);
    port_.member_gone(name, true);
  }
  for (const auto& name : change.left) {
    spdlog::info("'{}': member '{}' left", self_, name);
    port_.member_gone(name, false);
  }
  // A site heard of through gossip becomes a member by its own hello: greet it (the connection the
  // table goes out on starts with this site's hello, and the answer with that site's).
  for (const auto& name : change.heard_of) send_table(name, now);
  if (change.any()) {
    gossip_due_ = true;
    port_.membership_changed();
  }
  if (!change.joined.empty()) port_.adopt_bootstraps();
}

void MembershipDriver::gossip_all(Clock::time_point now) {
  const std::string body = encode_members(membership_.snapshot());
  for (const auto& r : membership_.alive_others()) port_.send_membership(r.name, MessageKind::kMembers, body, now);
  gossip_due_ = false;
  last_gossip_all_ = now;
}

void MembershipDriver::on_timer(Clock::time_point now) {
  if (now >= next_tick_) tick(now);
  // A change is gossiped to everyone soon, but at most four times per heartbeat interval.
  if (gossip_due_ && now - last_gossip_all_ >= timing_.heartbeat_interval / 4) gossip_all(now);
}

MembershipDriver::Clock::time_point MembershipDriver::next_due() const {
  Clock::time_point due = next_tick_;
  if (gossip_due_) due = std::min(due, last_gossip_all_ + timing_.heartbeat_interval / 4);
  return due;
}

void MembershipDriver::tick(Clock::time_point now) {
  if (timing_.adaptive_timeout) {
    timing_.heartbeat_timeout =
        std::max(std::chrono::ceil<std::chrono::milliseconds>(timing_.adaptive_timeout->deadline()),
                 timing_.heartbeat_interval + std::chrono::milliseconds(1));
    membership_.set_heartbeat_timeout(timing_.heartbeat_timeout);
  }
  {
    // This site's figures: its largest round trip to a live member, bounded as the wire bounds them.
    Pace own{0, std::min(step_us_, kMaxPaceMicros)};
    for (const auto& r : membership_.alive_others())
      if (auto t = rtt(r.name))
        own.rtt_us = std::max(own.rtt_us, std::min(static_cast<std::uint64_t>(t->count()), kMaxPaceMicros));
    membership_.note_own_pace(own);
  }
  process(membership_.tick(now), now);
  auto others = membership_.alive_others();
  const Pace& own = membership_.own_pace();
  for (const auto& r : others) {
    HeartbeatInfo hb{membership_.incarnation(), membership_.reported_round(), micros(now), 0, 0, own.rtt_us, own.step_us};
    if (auto it = echoes_.find(r.name); it != echoes_.end() && it->second.sent_us != 0) {
      hb.echo_us = it->second.sent_us;
      hb.held_us = micros(now) - micros(it->second.received);
    }
    port_.send_membership(r.name, MessageKind::kHeartbeat, encode_heartbeat(hb), now);
  }
  if (gossip_due_) {
    gossip_all(now);
  } else if (!others.empty()) {
    // Anti-entropy: one random member hears our whole table every tick.
    const auto& r = others[std::uniform_int_distribution<std::size_t>(0, others.size() - 1)(rng_)];
    send_table(r.name, now);
  }
  if (now >= next_probe_) {
    // Members we declared dead hear our table now and then: after a partition heals (or a false death)
    // each side learns that the other considers it dead, refutes, and the two sides find each other
    // again; nobody else would ever contact them. A truly dead site costs one small message per probe.
    const std::string table = encode_members(membership_.snapshot());
    for (const auto& r : membership_.records())
      if (r.state == MemberState::kDead && r.name != self_)
        port_.send_membership(r.name, MessageKind::kMembers, table, now);
    next_probe_ = now + timing_.heartbeat_timeout;
  }
  port_.greet_bootstraps(encode_hello(membership_.hello()), now);
  for (auto it = hinted_.begin(); it != hinted_.end();)
    it = now - it->second > timing_.heartbeat_timeout ? hinted_.erase(it) : std::next(it);
  next_tick_ = now + timing_.heartbeat_interval;
}

bool MembershipDriver::note_round(std::uint64_t round, bool own) {
  if (own) membership_.note_own_round(round);
  if (round <= round_) return false;
  round_ = round;
  membership_.note_round(round);
  return true;
}

void MembershipDriver::leave(Clock::time_point now) {
  membership_.leave();
  const std::string body = encode_leave(LeaveInfo{membership_.incarnation()});
  for (const auto& r : membership_.alive_others()) port_.send_membership(r.name, MessageKind::kLeave, body, now);
}

void MembershipDriver::expel(const std::string& name, Clock::time_point now) {
  hinted_.erase(name);
  echoes_.erase(name);
  process(membership_.expel(name), now);
}

std::optional<std::chrono::microseconds> MembershipDriver::rtt(const std::string& name) const {
  auto it = echoes_.find(name);
  if (it == echoes_.end() || !it->second.rtt_us) return std::nullopt;
  return std::chrono::microseconds(static_cast<std::int64_t>(*it->second.rtt_us));
}

}  // namespace meridian::peer
