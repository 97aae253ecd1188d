#include "peer/membership.h"

#include <algorithm>
#include <limits>
#include <tuple>

#include <spdlog/spdlog.h>

namespace meridian::peer {

namespace {

// Views kept for view_for(); older rounds are answered with the oldest kept view.
constexpr std::size_t kKeptViews = 16;
// Views gossiped in each member list: enough for a site that missed a few changes to catch up.
constexpr std::size_t kGossipedViews = 8;
// Held-back proposals kept for each proposer (distinct ones per id, and ids): enough for the changes
// in flight. Each proposer has its own quota, so that one flooding member evicts only its own.
constexpr std::size_t kHeldBackPerId = 4;
constexpr std::size_t kHeldBackIds = 16;

// Conflicting proposals for one id: the greater wins everywhere (see the header comment).
bool wins_over(const View& a, const View& b) {
  if (a.size() != b.size()) return a.size() > b.size();
  return std::tie(a.effective_round, a.members, a.pace) > std::tie(b.effective_round, b.members, b.pace);
}

// a + b, at most the largest round (a far-ahead first report must not wrap a bound).
std::uint64_t saturating_add(std::uint64_t a, std::uint64_t b) {
  return a > std::numeric_limits<std::uint64_t>::max() - b ? std::numeric_limits<std::uint64_t>::max() : a + b;
}

std::string names(const View& v) {
  std::string out;
  for (const auto& m : v.members) out += (out.empty() ? "" : ",") + m;
  return out;
}

int state_rank(MemberState s) { return static_cast<int>(s); }  // alive 0 < dead 1 < left 2

const char* state_name(MemberState s) {
  switch (s) {
    case MemberState::kAlive: return "alive";
    case MemberState::kDead: return "dead";
    case MemberState::kLeft: return "left";
  }
  return "unknown";
}

// Never wraps: at the largest incarnation a site stays there.
std::uint64_t next_incarnation(std::uint64_t incarnation) {
  return incarnation == std::numeric_limits<std::uint64_t>::max() ? incarnation : incarnation + 1;
}

bool newer(const MemberRecord& a, const MemberRecord& b) {
  return std::tuple(a.incarnation, state_rank(a.state)) > std::tuple(b.incarnation, state_rank(b.state));
}

}  // namespace

void MembershipChange::merge(const MembershipChange& o) {
  joined.insert(joined.end(), o.joined.begin(), o.joined.end());
  restarted.insert(restarted.end(), o.restarted.begin(), o.restarted.end());
  died.insert(died.end(), o.died.begin(), o.died.end());
  left.insert(left.end(), o.left.begin(), o.left.end());
  heard_of.insert(heard_of.end(), o.heard_of.begin(), o.heard_of.end());
  refused.insert(refused.end(), o.refused.begin(), o.refused.end());
  records = records || o.records;
  views = views || o.views;
}

Membership::Membership(MembershipConfig config, Clock::time_point now) : config_(std::move(config)), now_(now) {
  members_[config_.self] =
      Entry{{config_.self, config_.address, config_.region, config_.incarnation, MemberState::kAlive}, now};
  views_.push_back(View::of({config_.self}, 0, 0));
  in_force_ = views_;
}

void Membership::heard_from(const std::string& name, Clock::time_point now) {
  now_ = std::max(now_, now);
  auto it = members_.find(name);
  if (it != members_.end() && it->second.record.state == MemberState::kAlive) it->second.last_heard = now;
}

MembershipChange Membership::merge_own_record(const MemberRecord& r, const std::string& from, Clock::time_point now) {
  MembershipChange change;
  Entry& me = members_.at(config_.self);
  if (leaving_ || r.state == MemberState::kAlive || r.incarnation < me.record.incarnation) return change;
  if (r.state == MemberState::kLeft) {
    // Only this site leaves (or a site whose roster dropped it, and that one no longer talks to it):
    // nothing to refute, and refuting would let the sender step the incarnation.
    change.refused.push_back({RejectCause::kUnvouched, "'" + from + "' says this site left; only this site says so"});
    return change;
  }
  if (r.incarnation > me.record.incarnation) {
    // Every incarnation of this site that others hold came from this site, so none is above its own:
    // this one is forged. Refuting it would let the sender drive the incarnation up at will.
    change.refused.push_back({RejectCause::kIncarnation, "'" + from + "' says this site is " +
                                                             std::string(state_name(r.state)) + " at incarnation " +
                                                             std::to_string(r.incarnation) + ", above its own " +
                                                             std::to_string(me.record.incarnation)});
    return change;
  }
  // A site timed this one out at its current incarnation: refute by outliving it. At most once per
  // half timeout (the site that holds the verdict repeats it, so none is lost): the heartbeats, sent
  // more often, then carry one step at a time, and a member that repeats a forged verdict cannot
  // drive the incarnation up faster.
  if (last_refutation_ && now - *last_refutation_ < config_.heartbeat_timeout / 2) return change;
  const std::uint64_t next = next_incarnation(me.record.incarnation);
  if (next == me.record.incarnation) return change;  // saturated: nothing outlives it, and nothing wraps
  last_refutation_ = now;
  me.record.incarnation = next;
  spdlog::info("membership: '{}' considers '{}' {}; refuting with incarnation {}", from, config_.self,
               state_name(r.state), me.record.incarnation);
  change.records = true;
  return change;
}

MembershipChange Membership::merge_record(const MemberRecord& r, Source source, const std::string& from,
                                          Clock::time_point now) {
  if (r.name == config_.self) return merge_own_record(r, from, now);
  MembershipChange change;
  if (config_.admissible && !config_.admissible(r.name)) {
    change.refused.push_back(
        {RejectCause::kInventedMember, "a record of '" + r.name + "', a site outside this site's roster"});
    return change;
  }
  auto it = members_.find(r.name);
  if (source == Source::kRelayed) {
    if (it == members_.end()) {
      if (r.state == MemberState::kLeft) return change;  // nobody to contact: it greets us if it comes back
      // Known only from `from`: a site to contact, not a member. Held as not heard from and never
      // gossiped on, so a rumour neither enters a view nor spreads; the site's own hello makes it a
      // member. The first address heard is kept: the site corrects it itself when it greets this one.
      MemberRecord heard = r;
      heard.state = MemberState::kDead;
      members_[r.name] = Entry{heard, now, false, r.state == MemberState::kAlive};
      change.heard_of.push_back(r.name);
      return change;
    }
    const MemberRecord& held = it->second.record;
    if (it->second.vouched && newer(r, held)) {
      change.refused.push_back(
          {RejectCause::kUnvouched, "'" + from + "' says '" + r.name + "' is " + state_name(r.state) +
                                        " at incarnation " + std::to_string(r.incarnation) + "; only '" + r.name +
                                        "' may say that (here: " + state_name(held.state) + " at incarnation " +
                                        std::to_string(held.incarnation) + ")"});
    } else if (it->second.vouched && r.incarnation == held.incarnation && !r.address.empty() &&
               r.address != held.address) {
      // Where a site listens is its own word (its hello): another address for it is a probe at best.
      change.refused.push_back({RejectCause::kUnvouched, "'" + from + "' says '" + r.name + "' listens at '" +
                                                             r.address + "'; only '" + r.name +
                                                             "' says where it listens (here: '" + held.address + "')"});
    }
    return change;
  }

  // The member's own word about itself.
  if (it != members_.end() && !it->second.vouched) {
    members_.erase(it);
    it = members_.end();
  }
  if (r.state == MemberState::kDead) return change;  // no site declares itself dead
  if (it != members_.end() && !newer(r, it->second.record)) return change;
  if (source == Source::kOwn && it != members_.end() && it->second.record.state == MemberState::kAlive &&
      r.incarnation > next_incarnation(it->second.record.incarnation)) {
    // A live member's heartbeats carry each refutation, one step at a time (see merge_own_record);
    // a larger step is a restart only when it comes in a hello. After a death or leave here, any
    // step is taken: the member may have refuted others' verdicts meanwhile.
    change.refused.push_back({RejectCause::kIncarnation, "'" + r.name + "' raises its incarnation from " +
                                                             std::to_string(it->second.record.incarnation) + " to " +
                                                             std::to_string(r.incarnation) +
                                                             " without a hello: more than one step"});
    return change;
  }

  const bool was_alive = it != members_.end() && it->second.record.state == MemberState::kAlive;
  MemberRecord merged = r;
  if (it != members_.end()) {
    // Gossip about a member may omit what a direct hello told us.
    if (merged.address.empty()) merged.address = it->second.record.address;
    if (merged.region.empty()) merged.region = it->second.record.region;
  }
  const bool restarted = was_alive && r.state == MemberState::kAlive;  // higher incarnation, still alive
  if (restarted && source == Source::kHello) {
    // A new process says hello on every connection it opens; a site refuting a false death keeps its
    // connections (and its state) and raises its incarnation only in gossip and heartbeats. So a
    // hello with a higher incarnation from a member counted alive is a restart: the old incarnation
    // died unnoticed and took the rounds it was in with it. Its peers announce that as a view change
    // (tick() proposes a view without it, then one with it) so that the round in flight can be
    // redone and the new incarnation joins at an announced round. A view already announced after the
    // one in force that leaves it out is that change (a peer heard the hello first and proposed it):
    // the hello reaches each site directly, later than the views of the site it greeted first.
    superseded_[r.name] = view_for(newest_round_).id;
    change.restarted.push_back(r.name);
    spdlog::info("membership: '{}' restarted (incarnation {} replaces {})", r.name, r.incarnation,
                 it->second.record.incarnation);
  }
  // A member that was here before and is alive again (back after a leave or a death here, or a
  // restart): each return costs a view change or two, so they are spaced (see the header comment).
  if (it != members_.end() && r.state == MemberState::kAlive && (!was_alive || (restarted && source == Source::kHello)))
    note_return(r.name, r.incarnation, now, change);
  members_[r.name] = Entry{merged, now};
  change.records = true;
  if (r.state == MemberState::kAlive && (!was_alive || restarted)) change.joined.push_back(r.name);
  if (r.state == MemberState::kDead && was_alive) change.died.push_back(r.name);
  if (r.state == MemberState::kLeft && was_alive) change.left.push_back(r.name);
  return change;
}

MembershipChange Membership::merge_view(const View& v, const std::string& from, bool retry) {
  MembershipChange change;
  if (v.id == 0) return change;  // the local initial view of some site
  if (config_.admissible)
    for (const auto& name : v.members)
      if (name != config_.self && !config_.admissible(name)) {
        change.refused.push_back({RejectCause::kInventedMember, "'" + from + "' proposes view " + std::to_string(v.id) +
                                                                    " with '" + name +
                                                                    "', a site outside this site's roster"});
        return change;
      }
  auto it =
      std::lower_bound(views_.begin(), views_.end(), v.id, [](const View& a, std::uint64_t id) { return a.id < id; });
  const bool held = it != views_.end() && it->id == v.id;
  if (held && *it == v) return change;
  if (!held && it == views_.begin() && views_.size() >= kKeptViews) return change;  // older than anything we keep
  // The view `v` follows here: the one held with the next lower id.
  const View* before = it == views_.begin() ? nullptr : &*std::prev(it);
  if (before && before->id != 0) {
    // Where a proposal may start: a view lead past the view it follows and the window past the
    // rounds believed (a proposer ahead by the window proposes a lead after its own rounds).
    const std::uint64_t window = kRoundWindowLeads * std::max<std::uint64_t>(config_.view_lead_rounds, 1);
    const std::uint64_t latest =
        saturating_add(std::max(newest_round_, before->effective_round), config_.view_lead_rounds + window);
    if (v.effective_round > latest) {
      if (!retry)
        change.refused.push_back({RejectCause::kImplausibleRound,
                                  "'" + from + "' proposes view " + std::to_string(v.id) + " from round " +
                                      std::to_string(v.effective_round) + ", beyond the plausible " +
                                      std::to_string(latest)});
      return change;
    }
  }
  // Own evidence: a new view must not drop a member of the one it follows that this site hears, and
  // a conflicting one must not drop such a member of the one held.
  if (const View* against = held ? &*it : before)
    if (auto dropped = dropped_live_member(v, *against)) {
      hold_back(v, from,
                {RejectCause::kUnjustifiedView, "'" + from + "' proposes view " + std::to_string(v.id) + " (" +
                                                    names(v) + ") without '" + *dropped +
                                                    "', which this site still hears; held back until its own "
                                                    "evidence agrees"},
                retry, change);
      return change;
    }
  // A pace is the members' own figures: a view that brings a pace other than the one it replaces or
  // follows, whatever its members, is taken only when this site's own figures of those members agree
  // (see the header comment). A change of members is judged too, or a member could race an honest
  // join or death with a proposal of its own that carries a forged pace. The pace of the view it
  // follows is not judged: its proposer carries it forward while a joiner's figures are missing
  // there, and it moves nothing (the first member's pace rule corrects it once the view is in force).
  if (const View* against = held ? &*it : before;
      against && against->id != 0 && against->pace != v.pace &&
      (against->members == v.members || !before || before->pace != v.pace))
    if (auto seen = pace_unvouched(v)) {
      hold_back(v, from,
                {RejectCause::kUnjustifiedView,
                 "'" + from + "' proposes view " + std::to_string(v.id) + " (" + names(v) + ") with the pace " +
                     std::to_string(v.pace.rtt_us) + " µs round trip, " + std::to_string(v.pace.step_us) +
                     " µs step, which the members' own figures here (" + *seen +
                     ") do not bear out; held back until they do"},
                retry, change);
      return change;
    }
  // A member back too soon after its last return is held out of views until its interval has passed,
  // whoever proposes it: the return was counted when it came (see the header comment).
  if (const View* against = held ? &*it : before)
    if (auto early = early_return(v, *against)) {
      hold_back(v, from,
                {RejectCause::kUnjustifiedView, "'" + from + "' proposes view " + std::to_string(v.id) + " (" +
                                                    names(v) + ") taking back '" + *early +
                                                    "', which came back within the interval of its last return"},
                /*retry=*/true, change);
      return change;
    }
  // Whether taking `v` now would exceed the hearsay allowance (see the header comment); held back if so.
  auto over_hearsay_allowance = [&] {
    const auto unheard = hearsay_member(v);
    if (!unheard) return false;
    if (!last_hearsay_ || now_ - *last_hearsay_ >= config_.hearsay_view_interval) {
      last_hearsay_ = now_;
      return false;
    }
    hold_back(v, from,
              {RejectCause::kHearsayView,
               "'" + from + "' proposes view " + std::to_string(v.id) + " (" + names(v) + ") with '" + *unheard +
                   "', which this site has not heard from, within " +
                   std::to_string(config_.hearsay_view_interval.count()) +
                   " ms of the last such view it took; held back until '" + *unheard +
                   "' is heard from or that time has passed"},
              retry, change);
    return true;
  };
  if (!held) {
    if (over_hearsay_allowance()) return change;
    View fresh = v;
    if (it == views_.end() && v.effective_round <= own_round_ && v.rank_of(config_.self) && !leaving_) {
      // A proposal from a round this site has already run past (its proposer knew only a stale round:
      // it has just restarted, say). This site cannot run in it from there, so it re-issues the same
      // view from its own lead; being greater, that proposal wins wherever the stale one has not been
      // run in yet, the proposer included.
      fresh.effective_round = next_effective_round();
      spdlog::debug("membership: '{}' re-issues view {} from round {} (proposed from round {})", config_.self, v.id,
                    fresh.effective_round, v.effective_round);
    }
    views_.insert(it, std::move(fresh));
    if (views_.size() > kKeptViews) views_.erase(views_.begin());
    change.views = true;
    return change;
  }
  // Conflicting proposals with the same id: the greater one wins on every site, unless we already run
  // in ours (then the next proposal repairs the membership). Only our own rounds count: a site that
  // has just resumed, or heard its peers' rounds, runs in no view yet and must take the winner.
  if (it->effective_round <= own_round_) return change;
  // A proposal that leaves this site out never replaces one that has it: its proposer thinks this
  // site is gone (a partition, a false death), and this site may already run in its own view (a
  // redo runs in a view before its effective round). The next view, with everybody, repairs it.
  if (it->rank_of(config_.self) && !v.rank_of(config_.self)) return change;
  if (wins_over(v, *it)) {
    // A rival that lists a site not heard from here waits for that site's hello, allowance or not:
    // taken on one site's word, it would part this site from the members that keep the view it
    // replaces, and each would then wait for a view the other does not hold.
    if (const auto unheard = hearsay_member(v)) {
      hold_back(v, from,
                {RejectCause::kHearsayView, "'" + from + "' proposes view " + std::to_string(v.id) + " (" + names(v) +
                                                ") in place of the one held, with '" + *unheard +
                                                "', which this site has not heard from; held back until '" +
                                                *unheard + "' is heard from"},
                retry, change);
      return change;
    }
    *it = v;
    confirmed_.erase(v.id);  // the members held the one it replaces
    change.views = true;
  }
  return change;
}

std::optional<std::string> Membership::dropped_live_member(const View& v, const View& before) const {
  if (before.id == 0 || leaving_) return std::nullopt;
  for (const auto& name : before.members) {
    if (v.rank_of(name) || !is_alive(name) || superseded_.contains(name)) continue;
    // A process that runs no round yet may be a restart: views that leave its previous
    // incarnation out are history it must hold to rejoin where its peers wait for it.
    if (name == config_.self && !runs_) continue;
    return name;
  }
  return std::nullopt;
}

std::optional<std::string> Membership::pace_unvouched(const View& v) const {
  Pace seen;  // the largest figures the members of `v` reported here, each its own
  for (const auto& name : v.members)
    if (const auto it = paces_.find(name); it != paces_.end()) {
      seen.rtt_us = std::max(seen.rtt_us, it->second.rtt_us);
      seen.step_us = std::max(seen.step_us, it->second.step_us);
    }
  // The margin the first member proposes by (pace_moved): figures within it call for no other pace,
  // so the shape the view's pace chooses is the one the members' own figures choose, give or take it.
  // A site that holds no figures yet has nothing to go by, as with a first round report: it takes the
  // pace (conflicting proposals then settle by comparison, as everywhere). Members without figures
  // here (a joiner whose heartbeat has not come yet) are judged by the others alone: a forged figure
  // cannot hide behind a member this site cannot check. An honest pace that a slow joiner's figures
  // raise is held back only until that joiner's own heartbeat reaches this site (held-back views are
  // retried), which is soon: the proposer had them, and the joiner heartbeats every member.
  if (!pace_moved(v.pace, seen)) return std::nullopt;
  return std::to_string(seen.rtt_us) + " µs round trip, " + std::to_string(seen.step_us) + " µs step";
}

std::optional<std::string> Membership::early_return(const View& v, const View& against) const {
  if (!runs_ || leaving_) return std::nullopt;
  for (const auto& [name, until] : return_held_)
    if (until > now_ && v.rank_of(name) && !against.rank_of(name)) return name;
  return std::nullopt;
}

void Membership::note_return(const std::string& name, std::uint64_t incarnation, Clock::time_point now,
                             MembershipChange& change) {
  const auto last = returned_.find(name);
  if (last == returned_.end() || now - last->second >= config_.hearsay_view_interval) {
    returned_[name] = now;
    return_held_.erase(name);
    return;
  }
  const auto until = last->second + config_.hearsay_view_interval;
  return_held_[name] = until;
  change.refused.push_back(
      {RejectCause::kIncarnation,
       "'" + name + "' is back at incarnation " + std::to_string(incarnation) + " " +
           std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(now - last->second).count()) +
           " ms after its last return; held out of views for " +
           std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(until - now).count()) + " ms"});
}

void Membership::hold_back(const View& v, const std::string& from, MembershipRefusal refusal, bool retry,
                           MembershipChange& change) {
  // Counted once, whoever sends it again (its proposer, or members that relay what they hold).
  const bool known = std::any_of(held_back_.begin(), held_back_.end(), [&](const auto& by_proposer) {
    const auto ids = by_proposer.second.find(v.id);
    return ids != by_proposer.second.end() && std::find(ids->second.begin(), ids->second.end(), v) != ids->second.end();
  });
  // Kept in the sender's own quota, so that another member's flood cannot evict it.
  auto& mine = held_back_[from];
  auto& kept = mine[v.id];
  if (std::find(kept.begin(), kept.end(), v) == kept.end()) {
    kept.push_back(v);
    if (kept.size() > kHeldBackPerId) kept.erase(kept.begin());
    if (mine.size() > kHeldBackIds) mine.erase(mine.begin());
  }
  if (known || retry) return;
  change.refused.push_back(std::move(refusal));
}

std::optional<std::string> Membership::hearsay_member(const View& v) const {
  // A site that runs no round yet takes the federation's views as its history and start. A view that
  // a newer view in force here starts no later than is history too: no round waits for it
  // (view_awaited), since every round from its first runs in that newer view or a later one.
  if (!runs_ || leaving_) return std::nullopt;
  if (std::any_of(in_force_.begin(), in_force_.end(),
                  [&](const View& w) { return w.id > v.id && w.effective_round <= v.effective_round; }))
    return std::nullopt;
  for (const auto& name : v.members)
    if (name != config_.self && !is_alive(name)) return name;
  return std::nullopt;
}

void Membership::retry_held_back(MembershipChange& change) {
  // Ascending ids, whoever proposed them: a view taken may be the one the next proposal follows.
  std::multimap<std::uint64_t, std::pair<View, std::string>> pending;
  for (auto& [from, by_id] : std::exchange(held_back_, {}))
    for (auto& [id, kept] : by_id)
      for (auto& v : kept) pending.emplace(id, std::pair(std::move(v), from));
  for (auto& [id, held] : pending) {
    if (id < views_.front().id) continue;  // older than anything kept: history nobody runs in any more
    change.merge(merge_view(held.first, held.second, true));
  }
}

std::vector<std::string> Membership::missing_holders(const View& v) const {
  std::vector<std::string> out;
  for (const auto& name : v.members) {
    if (name == config_.self) continue;
    // Gone by this site's own evidence: it will not confirm, and the next view leaves it out (a round
    // in this one fails and is redone there), as for a member that dies after the view took effect.
    const auto e = members_.find(name);
    if (e != members_.end() && e->second.vouched && e->second.record.state != MemberState::kAlive) continue;
    // A site not heard from here is no member yet: what it says it holds confirms nothing (a rostered
    // site that never joined would otherwise bring a view listing itself into force).
    if (e == members_.end() || !e->second.vouched) {
      out.push_back(name);
      continue;
    }
    auto h = holdings_.find(name);
    if (h == holdings_.end() || std::find(h->second.begin(), h->second.end(), v) == h->second.end())
      out.push_back(name);
  }
  return out;
}

void Membership::refresh_in_force() {
  std::erase_if(confirmed_, [&](std::uint64_t id) { return id < views_.front().id; });
  // The newest view in force stays in force even once it is no longer among the views kept.
  View fallback = in_force_.back();
  in_force_.clear();
  const View* before = nullptr;
  bool before_in_force = true;
  for (const auto& v : views_) {
    bool in_force = v.id == 0 || confirmed_.contains(v.id);
    if (!in_force && missing_holders(v).empty()) {
      confirmed_.insert(v.id);
      in_force = true;
    }
    // A new pace for the same members: nobody defers it, so it follows the view it amends.
    if (!in_force && before && before->members == v.members) in_force = before_in_force;
    if (in_force) in_force_.push_back(v);
    before = &v;
    before_in_force = in_force;
  }
  if (in_force_.empty()) in_force_.push_back(std::move(fallback));
}

MembershipChange Membership::settled(MembershipChange change) {
  // Only new views, records (a death) or holdings move a view into force: a heartbeat costs nothing.
  if (!change.views && !change.records && !holdings_changed_) return change;
  holdings_changed_ = false;
  const auto before = in_force_;
  refresh_in_force();
  // A view that came into force is news for the transport (and its members), like a new view.
  if (in_force_ != before) change.views = true;
  return change;
}

std::optional<std::string> Membership::pending_view_note() const {
  for (auto v = views_.rbegin(); v != views_.rend(); ++v) {
    if (std::find(in_force_.begin(), in_force_.end(), *v) != in_force_.end()) return std::nullopt;
    const auto missing = missing_holders(*v);
    if (missing.empty()) continue;  // a pace that waits for the view before it
    std::string who;
    for (const auto& name : missing) who += (who.empty() ? "" : ", ") + name;
    return "view " + std::to_string(v->id) + " (" + names(*v) + ") is not in force here until " + who +
           (missing.size() == 1 ? " holds" : " hold") + " it too";
  }
  return std::nullopt;
}

MembershipChange Membership::on_hello(const HelloInfo& hello, Clock::time_point now) {
  now_ = std::max(now_, now);
  MemberRecord r{hello.name, hello.listen_address, hello.region, hello.incarnation, MemberState::kAlive};
  MembershipChange change;
  auto it = members_.find(hello.name);
  if (it != members_.end() && it->second.record.incarnation == hello.incarnation &&
      it->second.record.state == MemberState::kAlive && it->second.record.address != hello.listen_address &&
      !hello.listen_address.empty()) {
    // Same incarnation, new address: only a direct hello may correct an address.
    it->second.record.address = hello.listen_address;
    change.records = true;
  }
  change.merge(merge_record(r, Source::kHello, hello.name, now));
  heard_from(hello.name, now);
  note_report(hello.name, hello.round, change);
  // Its hello may be the evidence a held-back view waited for (a join, a restart).
  retry_held_back(change);
  return settled(std::move(change));
}

MembershipChange Membership::on_members(const std::string& from, const MemberListInfo& list, Clock::time_point now) {
  now_ = std::max(now_, now);
  MembershipChange change;
  if (from != config_.self) {
    // What `from` holds, in its own word: it confirms the views it is a member of (see the header).
    // The newest few by id, so that a long list cannot grow the table.
    std::vector<View> held = list.views;
    std::sort(held.begin(), held.end(), [](const View& x, const View& y) { return x.id > y.id; });
    if (held.size() > kGossipedViews) held.resize(kGossipedViews);
    auto& before = holdings_[from];
    if (held != before) {
      before = std::move(held);
      holdings_changed_ = true;
    }
  }
  for (const auto& r : list.members)
    change.merge(merge_record(r, r.name == from ? Source::kOwn : Source::kRelayed, from, now));
  note_report(from, list.round, change);
  for (const auto& v : list.views) change.merge(merge_view(v, from));
  retry_held_back(change);
  return settled(std::move(change));
}

MembershipChange Membership::on_heartbeat(const std::string& name, const HeartbeatInfo& hb, Clock::time_point now) {
  MembershipChange change;
  auto it = members_.find(name);
  if (it != members_.end() && hb.incarnation > it->second.record.incarnation) {
    MemberRecord r = it->second.record;
    r.incarnation = hb.incarnation;
    r.state = MemberState::kAlive;
    change.merge(merge_record(r, Source::kOwn, name, now));
  }
  heard_from(name, now);
  note_report(name, hb.round, change);
  if (name != config_.self && members_.contains(name)) paces_[name] = Pace{hb.rtt_us, hb.step_us};
  return settled(std::move(change));
}

MembershipChange Membership::on_leave(const std::string& name, const LeaveInfo& leave) {
  auto it = members_.find(name);
  if (it == members_.end() || name == config_.self || !it->second.vouched) return {};
  MemberRecord r = it->second.record;
  if (leave.incarnation < r.incarnation) return {};
  r.incarnation = leave.incarnation;
  r.state = MemberState::kLeft;
  auto change = merge_record(r, Source::kOwn, name, it->second.last_heard);
  retry_held_back(change);
  return settled(std::move(change));
}

MembershipChange Membership::tick(Clock::time_point now) {
  now_ = std::max(now_, now);
  MembershipChange change;
  for (auto& [name, e] : members_) {
    if (name == config_.self || e.record.state != MemberState::kAlive) continue;
    if (now - e.last_heard > config_.heartbeat_timeout) {
      e.record.state = MemberState::kDead;
      change.died.push_back(name);
      change.records = true;
    }
  }
  if (!change.died.empty()) refresh_newest_round();
  if (leaving_) return settled(std::move(change));
  // A member whose return is held out of views comes back into them once its interval has passed
  // (then counted as its latest return).
  for (auto it = return_held_.begin(); it != return_held_.end();) {
    if (now_ < it->second && is_alive(it->first)) {
      ++it;
      continue;
    }
    if (is_alive(it->first)) returned_[it->first] = now_;
    it = return_held_.erase(it);
  }
  // This site's own timeouts may justify a proposal held back: taking it (its proposer's round and
  // pace) keeps every site on the first proposal of a change instead of proposing a rival.
  retry_held_back(change);
  auto alive = alive_names();
  // A member held out of views stays out of this site's proposals, unless a view held already took it
  // back (dropping it again would only add a change).
  for (const auto& [name, until] : return_held_)
    if (!views_.back().rank_of(name)) alive.erase(std::remove(alive.begin(), alive.end(), name), alive.end());
  // A member of the newest view that this site has only heard of is not proposed out before a
  // heartbeat timeout has passed since it was heard of: the view came through a peer that heard from
  // it, its own hello may still be on its way over a slow link, and nothing here says it died. A view
  // without it would be followed by one with it a moment later, and rounds in between redone.
  // A site that a peer holds alive, heard of here within that timeout but in no view held here yet,
  // holds every change proposal back instead: the peers that heard from it propose it (their views
  // reach this site with their gossip) and would count a view without it as unjustified, since they
  // hear it; proposing it here on a relay's word alone would let a rumour into a view. Its hello, a
  // view from a peer, or the timeout ends the wait (once per name: the record stays only heard of).
  bool hello_awaited = false;
  for (const auto& [name, e] : members_) {
    if (e.vouched || now - e.last_heard > config_.heartbeat_timeout) continue;
    if (views_.back().rank_of(name)) alive.insert(std::upper_bound(alive.begin(), alive.end(), name), name);
    else if (e.relayed_alive) hello_awaited = true;
  }
  // A superseded incarnation is out of the next view until some view newer than the one in force
  // when the restart was noticed leaves it out (proposed here or by a peer that noticed first).
  for (auto it = superseded_.begin(); it != superseded_.end();) {
    const bool announced = std::any_of(views_.begin(), views_.end(),
                                       [&](const View& v) { return v.id > it->second && !v.rank_of(it->first); });
    if (announced || !is_alive(it->first)) {
      it = superseded_.erase(it);
      continue;
    }
    alive.erase(std::remove(alive.begin(), alive.end(), it->first), alive.end());
    ++it;
  }
  if (alive != views_.back().members) {
    if (hello_awaited) return settled(std::move(change));
    // Also `view_lead_rounds` after the newest view's round: every announced view is in force for that
    // many rounds, so a mixer looking for the view after a failed one finds it (gossip/redo_view.h),
    // and the re-average a view change triggers a few rounds later (dts and dsync, after their delay)
    // still runs in that view, not in the next one (which may hold a site that is not there yet).
    const Pace pace = proposed_pace(alive);
    View v = View::of(std::move(alive), views_.back().id + 1, next_effective_round(), pace);
    spdlog::debug("membership: '{}' proposes view {} from round {} with {} members", config_.self, v.id,
                  v.effective_round, v.members.size());
    views_.push_back(std::move(v));
    if (views_.size() > kKeptViews) views_.erase(views_.begin());
    change.views = true;
  } else if (awaits_pace()) {
    // The amendment (see the header comment): the same round, so that nobody starts elsewhere for it; only the
    // first member, so that no two sites amend with different figures.
    const View& unmeasured = views_.back();
    if (unmeasured.members.front() != config_.self) return settled(std::move(change));
    if (!pace_awaited_ || pace_awaited_->first != unmeasured.id) pace_awaited_ = {unmeasured.id, now};
    auto pace = complete_pace(unmeasured.members);
    const bool patient = now - pace_awaited_->second < 2 * config_.heartbeat_timeout;
    if (!pace && !patient) {
      // A member whose figures are this late (its warm-up steps are slow, say) holds up every site's
      // start: the figures reported so far do, and the pace rule corrects them once the view is in force.
      Pace partial;
      for (const auto& name : unmeasured.members)
        if (auto it = paces_.find(name); it != paces_.end()) {
          partial.rtt_us = std::max(partial.rtt_us, it->second.rtt_us);
          partial.step_us = std::max(partial.step_us, it->second.step_us);
        }
      if (partial.measured()) pace = partial;
    }
    if (!pace) return settled(std::move(change));
    View v = View::of(unmeasured.members, unmeasured.id + 1, unmeasured.effective_round, *pace);
    spdlog::info(
        "membership: '{}' proposes view {} from round {} with the {} pace: round trip {} µs, step {} µs (view {}, "
        "from the same round, had none; no site has run it)",
        config_.self, v.id, v.effective_round, patient ? "measured" : "partly measured (not every member's yet)",
        v.pace.rtt_us, v.pace.step_us, unmeasured.id);
    views_.push_back(std::move(v));
    if (views_.size() > kKeptViews) views_.erase(views_.begin());
    change.views = true;
  } else if (config_.agree_pace && views_.back().id != 0 && views_.back().size() > 1 &&
             views_.back().members.front() == config_.self && views_.back().effective_round <= newest_round_) {
    // Only the first member proposes a new pace, so that two sites measuring slightly different
    // figures do not propose competing views; and only once the newest view is in force, so that a
    // pace that keeps moving makes one view per view_lead_rounds at most.
    const Pace fresh = federation_pace();
    if (pace_moved(views_.back().pace, fresh)) {
      View v = View::of(views_.back().members, views_.back().id + 1, next_effective_round(), fresh);
      spdlog::info(
          "membership: '{}' proposes view {} from round {} for a new pace: round trip {} µs, step {} µs "
          "(the view in force has {} µs, {} µs)",
          config_.self, v.id, v.effective_round, fresh.rtt_us, fresh.step_us, views_.back().pace.rtt_us,
          views_.back().pace.step_us);
      views_.push_back(std::move(v));
      if (views_.size() > kKeptViews) views_.erase(views_.begin());
      change.views = true;
    }
  }
  return settled(std::move(change));
}

const Pace& Membership::own_pace() const {
  static const Pace none;
  auto it = paces_.find(config_.self);
  return it == paces_.end() ? none : it->second;
}

Pace Membership::federation_pace() const {
  Pace out;
  for (const auto& [name, pace] : paces_) {
    if (!is_alive(name)) continue;
    out.rtt_us = std::max(out.rtt_us, pace.rtt_us);
    out.step_us = std::max(out.step_us, pace.step_us);
  }
  return out;
}

bool Membership::awaits_pace() const {
  const View& v = views_.back();
  return config_.agree_pace && !leaving_ && v.id != 0 && v.size() > 1 && !v.pace.measured() && !runs_ &&
         newest_round_ + config_.view_lead_rounds <= v.effective_round;
}

std::optional<Pace> Membership::complete_pace(const std::vector<std::string>& members) const {
  Pace out;
  for (const auto& name : members) {
    auto it = paces_.find(name);
    if (it == paces_.end() || it->second.rtt_us == 0 || it->second.step_us == 0) return std::nullopt;
    out.rtt_us = std::max(out.rtt_us, it->second.rtt_us);
    out.step_us = std::max(out.step_us, it->second.step_us);
  }
  return out;
}

Pace Membership::proposed_pace(const std::vector<std::string>& members) const {
  if (!config_.agree_pace) return {};
  // Partial figures (a member that joined a moment ago has no round trip yet) would understate the
  // pace the view then keeps for view_lead_rounds at least.
  return complete_pace(members).value_or(views_.back().pace);
}

std::uint64_t Membership::next_effective_round() const {
  return std::max(newest_round_ + config_.view_lead_rounds,
                  views_.back().id == 0 ? 0 : views_.back().effective_round + config_.view_lead_rounds);
}

void Membership::note_round(std::uint64_t round) {
  local_round_ = std::max(local_round_, round);
  refresh_newest_round();
}

std::optional<std::uint64_t> Membership::round_bound() const {
  // Round 0 says nothing: a site that has run no round yet (a joiner) must not drag the median down.
  // Nor does a round this process only resumed from a checkpoint (it may be far behind): this site's
  // own counts once it runs.
  std::vector<std::uint64_t> rounds;
  if (runs_ && local_round_ > 0) rounds.push_back(local_round_);
  for (const auto& [name, round] : reported_rounds_)
    if (round > 0 && is_alive(name)) rounds.push_back(round);
  if (rounds.empty()) return std::nullopt;
  // The lower median: one member far ahead (or a minority of them) cannot move it.
  auto median = rounds.begin() + static_cast<std::ptrdiff_t>((rounds.size() - 1) / 2);
  std::nth_element(rounds.begin(), median, rounds.end());
  const std::uint64_t window = kRoundWindowLeads * std::max<std::uint64_t>(config_.view_lead_rounds, 1);
  return saturating_add(*median, window);
}

void Membership::refresh_newest_round() {
  const auto bound = round_bound();
  newest_round_ = local_round_;
  for (const auto& [name, round] : reported_rounds_)
    if (is_alive(name) && (!bound || round <= *bound)) newest_round_ = std::max(newest_round_, round);
}

void Membership::note_report(const std::string& from, std::uint64_t round, MembershipChange& change) {
  if (from == config_.self) return;
  auto it = members_.find(from);
  const bool member = it != members_.end() && it->second.vouched;
  if (member) reported_rounds_[from] = round;
  // Judged with the report in: a lone report (nothing contradicts it yet) is its own median.
  const auto bound = round_bound();
  if (bound && round > *bound) {
    // A member's report stays its latest claim even when refused: round_bound() takes the lower median,
    // so a minority's claims cannot raise it, and refresh_newest_round() counts no round past it. Put
    // back instead, the earlier report would judge the next ones: two members running rounds faster
    // than the window per heartbeat would each be judged by the other's stale report, refused for ever.
    change.refused.push_back({RejectCause::kImplausibleRound,
                              "'" + from + "' reports round " + std::to_string(round) + ", beyond the plausible " +
                                  std::to_string(*bound) + " (the members' median round and " +
                                  std::to_string(kRoundWindowLeads) + " view leads)"});
    return;
  }
  if (!member) return;  // a site that is not a member has no round here
  refresh_newest_round();
}

void Membership::note_own_round(std::uint64_t round) {
  own_round_ = std::max(own_round_, round);
  runs_ = true;
  note_round(round);
}

void Membership::leave() {
  leaving_ = true;
  members_.at(config_.self).record.state = MemberState::kLeft;
}

MembershipChange Membership::expel(const std::string& name) {
  MembershipChange change;
  superseded_.erase(name);
  auto it = members_.find(name);
  if (name == config_.self || it == members_.end() || it->second.record.state == MemberState::kLeft) return change;
  const bool was_alive = it->second.record.state == MemberState::kAlive;
  it->second.record.state = MemberState::kLeft;
  change.records = true;
  if (was_alive) change.left.push_back(name);
  refresh_newest_round();
  retry_held_back(change);
  return settled(std::move(change));
}

MemberListInfo Membership::snapshot() const {
  MemberListInfo out;
  out.round = local_round_;
  for (const auto& [name, e] : members_)
    if (e.vouched) out.members.push_back(e.record);
  for (std::size_t i = views_.size() > kGossipedViews ? views_.size() - kGossipedViews : 0; i < views_.size(); ++i)
    if (views_[i].id != 0) out.views.push_back(views_[i]);
  return out;
}

HelloInfo Membership::hello() const {
  const auto& me = self_record();
  return HelloInfo{me.name, me.address, me.region, me.incarnation, local_round_, config_.terms, {}};
}

const MemberRecord* Membership::find(const std::string& name) const {
  auto it = members_.find(name);
  return it == members_.end() ? nullptr : &it->second.record;
}

std::optional<Membership::Clock::time_point> Membership::last_heard(const std::string& name) const {
  auto it = members_.find(name);
  if (it == members_.end() || name == config_.self) return std::nullopt;
  return it->second.last_heard;
}

bool Membership::is_alive(const std::string& name) const {
  const auto* r = find(name);
  return r && r->state == MemberState::kAlive;
}

bool Membership::only_heard_of(const std::string& name) const {
  const auto it = members_.find(name);
  return it != members_.end() && !it->second.vouched;
}

std::vector<MemberRecord> Membership::alive_others() const {
  std::vector<MemberRecord> out;
  for (const auto& [name, e] : members_)
    if (name != config_.self && e.record.state == MemberState::kAlive) out.push_back(e.record);
  return out;
}

std::vector<std::string> Membership::alive_names() const {
  std::vector<std::string> out;
  for (const auto& [name, e] : members_)
    if (e.record.state == MemberState::kAlive) out.push_back(name);
  return out;  // std::map iterates in sorted order
}

std::vector<MemberRecord> Membership::records() const {
  std::vector<MemberRecord> out;
  for (const auto& [name, e] : members_) out.push_back(e.record);
  return out;
}

std::optional<View> Membership::view_awaited(const std::vector<View>& held, const std::vector<View>& in_force,
                                             std::uint64_t round) {
  const View* running = &in_force.front();
  for (const auto& v : in_force)
    if (v.effective_round <= round) running = &v;
  std::optional<View> awaited;
  for (const auto& v : held)
    if (v.effective_round <= round && v.id > running->id &&
        std::find(in_force.begin(), in_force.end(), v) == in_force.end())
      awaited = v;
  return awaited;
}

View Membership::view_for(std::uint64_t round) const {
  const View* best = &views_.front();
  for (const auto& v : views_)
    if (v.effective_round <= round) best = &v;
  return *best;
}

}  // namespace meridian::peer
