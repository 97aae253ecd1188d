// Membership without a coordinator: every site keeps a table of member records, takes each member's
// own word about itself (below: who may say what), declares a member dead when nothing was heard
// from it for the heartbeat timeout, and proposes a new view whenever the set of live members
// differs from the newest view.
//
// Records merge by (incarnation, state) with left > dead > alive at equal incarnation, so a stale
// record never revives a dead member; a site that hears itself declared dead (falsely: another site
// timed it out) refutes it by raising its incarnation, and the others take the new incarnation from
// it directly. A member that restarts before its death was noticed (its hello brings a higher
// incarnation while the old one still counts as alive) is treated as a death followed by a join: the
// next view leaves it out and the one after takes the new incarnation back, both announced, so that
// the rounds the old incarnation was in are redone without it and the new one joins at an announced
// round. Views are numbered; a proposed view takes effect `view_lead_rounds` after the newest round
// any site reported (plausibly: see "Rounds" below) and after the newest view's round, so that gossip
// reaches every site before the switch, all switch at the same step, and every view is in force for at
// least that many rounds. Two sites may propose different views with the same id (a site that
// restarts proposes the view that takes it back from the stale round it knows while its peers propose
// it from theirs); the one with more members, then the greater (effective_round, members), wins
// everywhere, unless this process has already reached the round of the one it holds or the other one
// leaves out a member this site still hears, itself included (then the next view corrects the
// membership). The initial one-member view (id 0) is local and never gossiped.
//
// Paces (peer/pace.h), with MembershipConfig::agree_pace: every site reports its own figures in its
// heartbeats; a proposal for new members carries the federation's largest figures over the members
// it proposes once every one of them reported both (the previous view's pace until then), and the
// view's first member, alone, proposes a view with the same members and fresh figures when they
// moved beyond the margin (pace_moved) from the newest view's, once that view is in force.
// Conflicting proposals compare (effective_round, members, pace), so every site keeps the same pace
// for a view.
//
// A federation starts on a measured pace: nobody has a step time before training (the daemon times
// a few steps while it waits for its peers) nor a round trip before the heartbeats measure one, so
// the view that first gathers the members usually carries none. While that view awaits its pace
// (awaits_pace(): no site has run it, and it is still announced a full view_lead_rounds ahead of
// every round any site reported), its first member, alone, amends it as soon as every member
// reported both figures (after twice the heartbeat timeout, with the figures reported so far if
// they are measured): a view with the next id, the same members, the measured pace and the SAME
// effective round.
//
// Why that is safe: the amendment is announced a full lead before its round like any proposal, so a
// site that runs up to that round holds it in time; a site that starts right at that round waits
// for it while awaits_pace() (daemon/start_protocol.cc); and one that stops waiting (bounded) still
// starts at the same round as everybody, and once it reports that round nobody amends any more.
// Only an amendment proposed within a gossip delay of a site giving up would find that site on the
// unmeasured view; the first member amends within twice the heartbeat timeout of having timed its
// own steps, far inside the sites' bound. A site that trains alone (--min-sites 1) when another one
// joins runs rounds (note_own_round), so it never amends nor waits, and the others stop awaiting
// once its reports show its round moved on. A new id rather than a new pace under the same id:
// conflicting proposals for one id are settled by comparison, which a site that already runs in its
// own no longer takes. The unmeasured view is in force at no round (the one exception to "every
// view is in force for view_lead_rounds at least": nobody runs in it, so nothing is redone or
// re-averaged in it). Once any site runs the view's round, or the view carries a pace, nothing is
// amended: a pace then comes only by the rule above, a lead after the newest view is in force.
//
// Who may say what (a rostered site that turns hostile must not evict, revive or invent another):
// - A site's own record (alive, left, its incarnation, its address) is taken only from that site
//   itself: its hello, its heartbeats, its leave, or its own record in the member list it sends.
//   The transport authenticates the sender of every message (CurveZMQ, the roster), so "from" is
//   that site. A record about a site that arrives from another one (relayed) never changes what this
//   site holds about it; one that would have (a newer incarnation, "dead", "left") is refused and
//   counted (RejectCause::kUnvouched). The full mesh makes that enough: every site hears every
//   other directly, so nothing needs a relay or a signature.
// - A relayed record of a site this one has no record of only makes it known as a site to contact
//   (MembershipChange::heard_of): it is held as "dead" (not heard from), never gossiped on, and its
//   own hello makes it a member. While one that the relay holds alive is fresh (heard of within the
//   heartbeat timeout) and in no view held here, this site proposes no change (tick): the sites that
//   heard from it propose it, and one that hears it would count a view without it as unjustified
//   (below), so an honest site's proposal never drops a member it has yet to hear from. At the first
//   formation this is what keeps a starting site from proposing the members it has heard from while
//   another's hello is still on its way; a rumour of an absent site delays this site's proposals once
//   per name, by one heartbeat timeout at most.
// - Death needs this site's own probes: a member is dead when THIS site heard nothing from it for
//   the heartbeat timeout (tick). Another site's "X dead" is never taken: every site probes every
//   other every heartbeat interval, so confirmations by others could not come sooner than its own
//   timeout, and one hostile member (or a one-sided link failure) could otherwise evict X.
// - Leaving is X's own word (its leave or its record) or this site's operator's (expel); a roster
//   change elsewhere reaches this site only through its own roster.
// - Incarnations: a site that hears itself declared dead or left at its own incarnation refutes
//   with the next one (saturating at UINT64_MAX, never wrapping), at most once per half heartbeat
//   timeout, so its heartbeats never carry more than one step; a member's own heartbeat, leave or
//   record that raises its incarnation by more than one over the one this site holds while it
//   holds it alive is refused and counted (RejectCause::kIncarnation); its hello (a restart) and
//   its word after a death here may raise it any amount. A claim that this site has an incarnation
//   above its own is refused and counted the same way.
// - A proposed view that names a site outside the roster (config.admissible) is refused and counted
//   (RejectCause::kInventedMember), and so is a record of such a site.
// - A view must agree with this site's own evidence: a proposal that leaves out a member of the view
//   it follows here (this site included once this process runs rounds: before, a view without it is
//   about its previous incarnation) that this site itself holds alive (heard within the timeout, not
//   an incarnation superseded by a restart) is held back and counted once
//   (RejectCause::kUnjustifiedView). It is taken as soon as this site's own evidence agrees (its own
//   timeout declares the member dead, the member's own leave, its restart's hello, this site's
//   operator's expel), before this site would propose a view of its own: so for honest sites, whose
//   evidence converges (every site hears every other directly), each adopts the first proposal of a
//   change as it would have, a heartbeat interval later at most, while one member's proposal that
//   drops a site the others hear is never taken. A conflicting proposal for an id this site holds
//   that drops such a member never replaces the held one either. Conflicting proposals compare
//   (size, effective_round, members, pace): the view with more members wins, so that a proposal
//   made before a join was heard of gives way to the one with the joiner everywhere (neither drops
//   anyone the other site hears). A site that has only its initial view (id 0) takes the
//   federation's views as they come: they are its history. A leaving site takes every view.
// - Hearsay views: a view newer than the one in force that lists a site this site has not heard from
//   (no hello of its own yet, or dead by this site's timeout) is taken on the proposer's word alone.
//   An honest join looks like that until the joiner's hello arrives; a view listing a rostered site
//   that never starts (or its proposer, never having joined) never comes into force, since that site
//   never holds it (a member's holding counts only once this site has heard from it), and each one
//   stalls this site's rounds once, for the daemon's bounded view wait. So a site that runs rounds
//   takes at most one new hearsay view per config.hearsay_view_interval; the others are held back and
//   counted once (RejectCause::kHearsayView), and taken when the site they list is heard from or the
//   interval has passed. A hearsay rival for an id held here is held back until that site is heard
//   from, whatever the interval: it would part this site from the members that keep the held view.
//   A site that runs no round yet takes them all (its history).
// - Paces: a view with another pace than the view it follows, or a rival for an id held here with
//   another pace, whether or not its members differ, is taken only when the figures the members
//   reported here in their own heartbeats bear it out (pace_moved would not call for another pace
//   over them); otherwise it is held back and counted once (RejectCause::kUnjustifiedView), and taken
//   once they do. Members without figures here (a joiner whose heartbeat has not come) are left out
//   of the judgement, and a site that holds no figures yet takes the view. A change of members that
//   carries the pace of the view it follows is not judged: its proposer carries that pace forward
//   until it holds every member's figures. So one member moves the pace only by its own figures, as
//   a slow site would, and within the margin over the others', also when it races an honest join or
//   death with a proposal of its own.
// - Held-back proposals are kept per proposer (a few ids, a few views per id), so that one member's
//   flood evicts only its own: an honest proposal waiting for this site's evidence stays.
// - Returns: a member alive again after a leave, a death here, or a restart's hello, within
//   config.hearsay_view_interval of its last return, is alive but held out of views until that
//   interval has passed, counted once (RejectCause::kIncarnation): this site's proposals leave it out
//   (unless the newest view already has it), and a view taking it back sooner is held back, uncounted
//   (at a site that runs rounds). A member therefore costs at most one return, two view changes, per
//   interval, however often it leaves and comes back.
// - Rounds: the round in a site's hello, heartbeats and member list is that site's own (the newest
//   round its process ran or resumed), never a relay of others'. A site's report is believed only
//   within kRoundWindowLeads view leads of the lower median of the rounds the live members report
//   (this site's own included once it runs rounds; rounds 0, of sites that ran none, aside); one beyond is refused and counted
//   (RejectCause::kImplausibleRound), and so is one from a site that is not a member. One member
//   therefore cannot push the start of new views ahead (a site with no round of its own and one
//   report takes that report: nothing contradicts it yet). A proposed view whose effective round
//   lies beyond that window and a view lead past the view it follows is refused the same way.
// - A view is in force only once its members hold it (views_in_force()): a view whose members differ
//   from those of the view before it is handed to rounds (the transport's view_for) when every other
//   member of it has sent a member list holding exactly that view, or is dead or left by this site's
//   own evidence; a view with the same members as the one before it (a pace) is in force when that
//   one is. Once in force a view stays so (unless a conflicting proposal replaces it before this site
//   runs it). Why: a site that defers a proposal (above) must not strand its proposer, who would
//   otherwise run rounds in it alone, abandon them, and wait for a newer view that never comes. An
//   honest site defers a proposal at most until its own heartbeat timeout fires for the same
//   member, so a view dropping a dead member takes effect everywhere within about one heartbeat
//   timeout of the first proposal, at the same round for all (the rounds that failed meanwhile are
//   redone in it); a view that one member never takes (a member that hears the dropped site, a
//   roster that lacks a joiner, a hostile member that stays silent) never takes effect, and the view
//   before it stays in force: pending_view_note() names who holds it up. Views are still proposed,
//   compared and gossiped as held (views(), latest_view()); only what rounds run in waits. The
//   members see a view come into force a gossip hop or two apart, which may be many rounds: so a
//   round at or past the effective round of a view held here but not in force awaits it
//   (view_awaited()), and its runner waits for it (bounded) rather than run that round in the view
//   before, which the members that hold the new view, and a joiner starting at its first round, do not.
// Refusals come back in MembershipChange::refused for the transport to count.
//
// This class is pure logic with time passed in; the transport feeds it and acts on its Changes.
// Thread-safety: none; the transport's I/O thread owns it.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "peer/membership_messages.h"
#include "peer/rejection.h"
#include "peer/view.h"

namespace meridian::peer {

struct MembershipConfig {
  std::string self;
  std::string address;  // this site's advertised listen address
  std::string region;
  std::uint64_t incarnation = 0;
  std::chrono::milliseconds heartbeat_timeout{3000};
  std::uint64_t view_lead_rounds = 8;  // keep it above the rounds a view change takes to act (D + P)
  // Names this site accepts as members (the roster); empty function: any name.
  std::function<bool(const std::string&)> admissible;
  // Announced in this site's hello (peer/federation_terms.h).
  FederationTerms terms;
  // The views carry paces for automatic shapes (see above); false: every view's pace stays zero.
  bool agree_pace = false;
  // At least this long between two views this site takes while running that list a site it has not
  // heard from (see above: hearsay views). Each such view that never comes into force stalls this
  // site's rounds once, for the daemon's view wait (daemon/federation/round_view.h): the daemon sets this to ten
  // of those waits, so that a member proposing them without end costs at most a tenth of the time.
  std::chrono::milliseconds hearsay_view_interval{50000};
};

// How far ahead of the members' rounds a reported round stays plausible, in view leads (see the
// header comment): as far apart as sites that mix together may drift (push-sum sites run ahead of
// their peers; the message validator takes shares up to 256 rounds old), 256 rounds at the default
// lead of 8.
inline constexpr std::uint64_t kRoundWindowLeads = 32;

// Part of an input that was refused (a record or a view), with the cause to count it under.
struct MembershipRefusal {
  RejectCause cause;
  std::string detail;
  friend bool operator==(const MembershipRefusal&, const MembershipRefusal&) = default;
};

// What changed because of one input; the transport connects, disconnects and gossips accordingly.
struct MembershipChange {
  std::vector<std::string> joined;     // became alive (new, revived or restarted with a higher incarnation)
  std::vector<std::string> restarted;  // of `joined`: its hello brought a new incarnation of a live member
  std::vector<std::string> died;
  std::vector<std::string> left;
  // Sites this one has just heard of through another site's gossip: contact them (a connection
  // starts with this site's hello, and theirs makes them members).
  std::vector<std::string> heard_of;
  std::vector<MembershipRefusal> refused;  // what the input held that was not taken
  bool records = false;                    // any record changed (gossip the table)
  bool views = false;                      // a view was added or replaced
  void merge(const MembershipChange& o);
  bool any() const { return records || views; }
};

class Membership {
 public:
  using Clock = std::chrono::steady_clock;

  Membership(MembershipConfig config, Clock::time_point now);

  // A direct message from `name` arrived (any kind): it is alive now.
  void heard_from(const std::string& name, Clock::time_point now);

  // Each input comes from one authenticated site: the hello's name, `from`, `name` (see the rules above).
  MembershipChange on_hello(const HelloInfo& hello, Clock::time_point now);
  MembershipChange on_members(const std::string& from, const MemberListInfo& list, Clock::time_point now);
  MembershipChange on_heartbeat(const std::string& name, const HeartbeatInfo& hb, Clock::time_point now);
  MembershipChange on_leave(const std::string& name, const LeaveInfo& leave);

  // Declares members dead whose last contact is older than the timeout; then proposes a view when the
  // live members differ from the newest view.
  MembershipChange tick(Clock::time_point now);

  // A round this process noted (run, or resumed from a checkpoint): the round it reports of itself.
  // With the rounds the members report (see above) it moves view effective rounds ahead.
  void note_round(std::uint64_t round);
  // The newest round believed: this site's own and the members' plausible reports.
  std::uint64_t newest_round() const { return newest_round_; }
  // What this site reports as its round in its hello, heartbeats and member list: its own.
  std::uint64_t reported_round() const { return local_round_; }
  // A round this process itself runs (also noted as seen). Only a view whose round this process has
  // reached is one it "runs in" when a conflicting proposal for the same id arrives: the rounds its
  // peers report, or a checkpoint an earlier process wrote, do not make it so.
  void note_own_round(std::uint64_t round);

  // This site's own figures (its largest round trip to a live member, its step time), shared in its
  // heartbeats and counted in the federation's pace.
  void note_own_pace(const Pace& pace) { paces_[config_.self] = pace; }
  const Pace& own_pace() const;
  // The federation's largest figures over the live members that reported any (this site included):
  // what a proposal now would carry. Unmeasured while no member reported a round trip or a step time.
  Pace federation_pace() const;
  // Whether the newest view awaits the amendment that gives it a measured pace (see above): the views
  // carry paces, the newest has members besides this site and no measured pace, this process runs no
  // round, and no site reported a round within view_lead_rounds of the view's. Its first member
  // proposes the amendment once every member reported both figures, or twice the heartbeat timeout
  // after its tick first saw the view await it, with the figures reported so far if measured.
  bool awaits_pace() const;
  // Marks this site as leaving: its own record becomes "left" and it stops proposing views.
  void leave();
  // The operator took `name` out of the roster (config.admissible no longer admits it): its record
  // becomes "left" at its incarnation, so that the gossip tells the other sites it is gone, and the
  // next tick proposes a view without it. Does nothing for this site itself or an unknown name.
  MembershipChange expel(const std::string& name);

  // The table and the newest views to gossip (without the sites only heard of).
  MemberListInfo snapshot() const;
  HelloInfo hello() const;
  std::uint64_t incarnation() const { return self_record().incarnation; }

  const std::string& self() const { return config_.self; }
  // --heartbeat-timeout auto: the driver moves the timeout as it measures (peer/membership_driver.h).
  void set_heartbeat_timeout(std::chrono::milliseconds timeout) { config_.heartbeat_timeout = timeout; }
  // Any record this site holds, one only heard of through gossip included (state "dead").
  const MemberRecord* find(const std::string& name) const;
  // When this site last heard from `name` (a direct message, or the record that made it alive);
  // nullopt for this site itself and for names it has no record of.
  std::optional<Clock::time_point> last_heard(const std::string& name) const;
  bool is_alive(const std::string& name) const;
  // Whether `name` is known only from another site's gossip: no word from it yet, so it is held as
  // "dead" although nothing says it died. A view announced by a site that has heard from it may
  // already list it.
  bool only_heard_of(const std::string& name) const;
  // Live members other than this site.
  std::vector<MemberRecord> alive_others() const;
  // Live members including this site, sorted.
  std::vector<std::string> alive_names() const;
  std::vector<MemberRecord> records() const;

  // The views held here (proposed here or taken), in force or not: what is gossiped and compared.
  View view_for(std::uint64_t round) const;
  const View& latest_view() const { return views_.back(); }
  const std::vector<View>& views() const { return views_; }
  // The views in force here (see above): the ones rounds run in, sorted by id, never empty.
  const std::vector<View>& views_in_force() const { return in_force_; }
  // While the newest view held is not in force: a line for people naming it and the members that do
  // not hold it yet ("view 4 (a, b, c) is not in force until a holds it too"); nullopt otherwise.
  std::optional<std::string> pending_view_note() const;
  // The view round `round` awaits here: the newest view held whose effective round is at most `round`,
  // newer than the view in force at `round` and not in force itself. Such a round should run once that
  // view comes into force (its members hold it), not in the older view, which its members may already
  // have left for it. nullopt when the view in force at `round` is the one to run it in.
  std::optional<View> view_awaited(std::uint64_t round) const { return view_awaited(views_, in_force_, round); }
  // The same from copies of views() and views_in_force(), for a transport that publishes them.
  static std::optional<View> view_awaited(const std::vector<View>& held, const std::vector<View>& in_force,
                                          std::uint64_t round);

 private:
  struct Entry {
    MemberRecord record;
    Clock::time_point last_heard;
    bool vouched = true;  // false: only heard of through another site's gossip (held as "dead")
    bool relayed_alive = false;  // only heard of, from a relay that holds it alive: its hello may be on its way
  };
  // Where a record comes from: the member's own hello, another message of its own, or another site.
  enum class Source { kHello, kOwn, kRelayed };
  const MemberRecord& self_record() const { return members_.at(config_.self).record; }
  MembershipChange merge_record(const MemberRecord& r, Source source, const std::string& from, Clock::time_point now);
  // A record about this site itself: refutes a death or leave at its own incarnation.
  MembershipChange merge_own_record(const MemberRecord& r, const std::string& from, Clock::time_point now);
  // `retry`: a proposal held back before (see the header comment), not counted again.
  MembershipChange merge_view(const View& v, const std::string& from, bool retry = false);
  // A member of `v` that this site has not heard from (not alive here by its own evidence), when
  // taking `v` would take it on another site's word alone (see the header comment); nullopt otherwise.
  std::optional<std::string> hearsay_member(const View& v) const;
  // The first member of `before` that `v` leaves out although this site's own evidence says it is
  // alive; nullopt when there is none, when `before` is the initial view, or while this site leaves.
  std::optional<std::string> dropped_live_member(const View& v, const View& before) const;
  // Whether the pace `v` carries is borne out here: nullopt when the figures of `v`'s members held
  // here agree with it (within pace_moved's margin; members without figures left out) or when none
  // are measured here yet; otherwise those figures, for people.
  std::optional<std::string> pace_unvouched(const View& v) const;
  // A member that `v` takes back although `against` has it out and its return is held out of views
  // here (see the header comment); nullopt otherwise, and while this site runs no round or leaves.
  std::optional<std::string> early_return(const View& v, const View& against) const;
  // `name` is alive again at `incarnation` after a leave, a death here or a restart: a return within
  // the interval of its last one is held out of views until the interval has passed, and counted.
  void note_return(const std::string& name, std::uint64_t incarnation, Clock::time_point now,
                   MembershipChange& change);
  // Keeps a proposal refused for now (`refusal` says why); counts it once (not again for a retry).
  void hold_back(const View& v, const std::string& from, MembershipRefusal refusal, bool retry,
                 MembershipChange& change);
  // Takes the held-back proposals this site's own evidence now justifies.
  void retry_held_back(MembershipChange& change);
  // A round `from` reports of itself (hello, heartbeat, member list): believed within the window
  // (see the header comment), else refused into `change`.
  void note_report(const std::string& from, std::uint64_t round, MembershipChange& change);
  // The largest plausible round: the lower median of the live members' reports (this site's own
  // round included once it runs) plus the window; nullopt while there is nothing to go by.
  std::optional<std::uint64_t> round_bound() const;
  void refresh_newest_round();
  // The members of `v` other than this site that neither hold it (their newest member list) nor are
  // dead or left by this site's own evidence.
  std::vector<std::string> missing_holders(const View& v) const;
  // Recomputes in_force_ from views_ (see above); every input that changes views or records calls it.
  void refresh_in_force();
  // `change` with in_force_ refreshed, for the inputs to return.
  MembershipChange settled(MembershipChange change);
  // Where a view proposed now takes effect: `view_lead_rounds` after the newest round any site
  // reported and after the newest view's round.
  std::uint64_t next_effective_round() const;

  // The pace a view proposed now for `members` carries (see above).
  Pace proposed_pace(const std::vector<std::string>& members) const;
  // The largest figures over `members` when every one of them reported both; nullopt otherwise.
  std::optional<Pace> complete_pace(const std::vector<std::string>& members) const;

  MembershipConfig config_;
  std::map<std::string, Entry> members_;  // includes this site
  std::map<std::string, Pace> paces_;     // the newest figures each member reported, this site's own too
  std::vector<View> views_;               // sorted by id, newest last, never empty
  std::vector<View> in_force_;            // see views_in_force()
  std::set<std::uint64_t> confirmed_;     // ids of views_ every other member was seen holding
  // The views each site's newest member list held (its own word: the sender is authenticated).
  std::map<std::string, std::vector<View>> holdings_;
  bool holdings_changed_ = false;  // since in_force_ was last refreshed
  std::uint64_t newest_round_ = 0;  // see newest_round()
  std::uint64_t local_round_ = 0;   // see note_round()
  std::map<std::string, std::uint64_t> reported_rounds_;  // each member's own report
  // Proposals held back (see the header comment), by proposer (the authenticated sender), then id: a
  // few distinct ones per id and a few ids for each proposer, so that one member's flood evicts only
  // its own.
  std::map<std::string, std::map<std::uint64_t, std::vector<View>>> held_back_;
  std::uint64_t own_round_ = 0;
  bool runs_ = false;  // this process noted a round of its own (own_round_ may be 0 then)
  // The view whose pace this site, its first member, awaits, and since when (see tick()).
  std::optional<std::pair<std::uint64_t, Clock::time_point>> pace_awaited_;
  bool leaving_ = false;
  std::optional<Clock::time_point> last_refutation_;  // see merge_own_record
  Clock::time_point now_;                             // the latest time an input brought
  std::optional<Clock::time_point> last_hearsay_;     // when this site last took a hearsay view
  // When each member last came back into views after a return (see note_return), and the members whose
  // latest return is held out of views until the given time.
  std::map<std::string, Clock::time_point> returned_;
  std::map<std::string, Clock::time_point> return_held_;
  // Members whose new incarnation arrived while the old one was still alive here, with the id of the
  // view in force at that moment; tick() leaves them out of one view before taking them back.
  std::map<std::string, std::uint64_t> superseded_;
};

}  // namespace meridian::peer
