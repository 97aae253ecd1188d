// Paces in views (peer/membership.h, peer/pace.h): the figures that automatic shapes come from reach
// every site in the view that announces them, the same for every site, ahead of the round they take
// effect at; a round trip that moves beyond the margin makes the view's first member announce a new
// pace, and nobody else does.
#include <catch2/catch.hpp>

#include "peer/membership.h"
#include "tests/peer/membership_config.h"
#include "peer/membership_driver.h"
#include "peer/wire_codec.h"

using namespace meridian::peer;
using namespace std::chrono_literals;
using Clock = Membership::Clock;

namespace {

MembershipConfig config(const std::string& self, bool agree_pace = true) {
  auto c = meridian::peer::testing::membership_config(self);
  c.agree_pace = agree_pace;
  return c;
}

// Every site hears every other's heartbeat with its own figures, then the tables are gossiped until
// nothing changes.
void exchange(std::vector<Membership*> sites, Clock::time_point now) {
  for (int pass = 0; pass < 20; ++pass) {
    bool changed = false;
    for (auto* from : sites)
      for (auto* to : sites)
        if (from != to) {
          HeartbeatInfo hb{from->incarnation(),     from->newest_round(),    1, 0, 0,
                           from->own_pace().rtt_us, from->own_pace().step_us};
          changed = to->on_heartbeat(from->hello().name, hb, now).any() || changed;
          changed = to->on_members(from->self(), from->snapshot(), now).any() || changed;
        }
    for (auto* s : sites) changed = s->tick(now).any() || changed;
    if (!changed) return;
  }
  FAIL("gossip did not settle");
}

struct Federation {
  Clock::time_point t0 = Clock::now();
  Membership a{config("a"), t0}, b{config("b"), t0}, c{config("c"), t0};
  std::vector<Membership*> all{&a, &b, &c};
  Federation() {
    for (auto* s : {&b, &c}) a.on_hello(s->hello(), t0);
  }
};

}  // namespace

TEST_CASE("a view for new members carries the federation's largest figures, the same at every site",
          "[peer][membership][pace][unit]") {
  Federation f;
  f.a.note_own_pace(Pace{20'000, 40'000});
  f.b.note_own_pace(Pace{90'000, 35'000});
  f.c.note_own_pace(Pace{60'000, 50'000});
  exchange(f.all, f.t0);
  const View& v = f.a.latest_view();
  REQUIRE(v.members == std::vector<std::string>{"a", "b", "c"});
  // Each figure is the largest any member reported (the slowest link, the slowest site).
  CHECK(v.pace == Pace{90'000, 50'000});
  for (auto* s : f.all) {
    CHECK(s->latest_view() == v);
    CHECK(s->view_for(v.effective_round).pace == v.pace);
  }
}

TEST_CASE("without agree_pace views carry no pace, whatever the heartbeats report", "[peer][membership][pace][unit]") {
  const auto t0 = Clock::now();
  Membership a(config("a", false), t0), b(config("b", false), t0);
  a.on_hello(b.hello(), t0);
  a.note_own_pace(Pace{20'000, 40'000});
  b.note_own_pace(Pace{90'000, 35'000});
  exchange({&a, &b}, t0);
  for (int round = 0; round < 50; round += 5) {
    a.note_own_round(round);
    b.note_own_round(round);
    exchange({&a, &b}, t0);
  }
  CHECK(a.latest_view().pace == Pace{});
  CHECK(a.latest_view().members.size() == 2);
  CHECK(a.latest_view() == b.latest_view());
  CHECK(a.latest_view().id == 1);  // no view for a pace
}

TEST_CASE("a round trip that moves beyond the margin is announced in a new view ahead of its round, at every site",
          "[peer][membership][pace][unit]") {
  Federation f;
  for (auto* s : f.all) s->note_own_pace(Pace{20'000, 40'000});
  exchange(f.all, f.t0);
  const View first = f.a.latest_view();
  REQUIRE(first.pace == Pace{20'000, 40'000});

  // The sites run past the view's round: a new pace is only proposed once the newest view is in force.
  for (auto* s : f.all) s->note_own_round(first.effective_round + 3);
  // A change within the margin (+25%) makes no view.
  f.c.note_own_pace(Pace{25'000, 40'000});
  exchange(f.all, f.t0);
  CHECK(f.a.latest_view() == first);

  // c's link gets much slower: the crossing doubles.
  f.c.note_own_pace(Pace{40'000, 40'000});
  exchange(f.all, f.t0);
  const View second = f.a.latest_view();
  CHECK(second.id == first.id + 1);
  CHECK(second.members == first.members);
  CHECK(second.pace == Pace{40'000, 40'000});
  // Announced ahead: it takes effect view_lead_rounds after the newest round anyone ran.
  CHECK(second.effective_round == first.effective_round + 3 + 5);
  for (auto* s : f.all) {
    CHECK(s->latest_view() == second);
    CHECK(s->view_for(second.effective_round - 1).pace == first.pace);
    CHECK(s->view_for(second.effective_round).pace == second.pace);
  }
}

TEST_CASE("only the view's first member proposes a new pace; the others wait for it",
          "[peer][membership][pace][unit]") {
  Federation f;
  for (auto* s : f.all) s->note_own_pace(Pace{20'000, 40'000});
  exchange(f.all, f.t0);
  const View first = f.a.latest_view();
  for (auto* s : f.all) s->note_own_round(first.effective_round + 1);
  // b and c hear of the slower link and tick; a does not hear it yet.
  f.c.note_own_pace(Pace{80'000, 40'000});
  HeartbeatInfo hb{f.c.incarnation(), f.c.newest_round(), 1, 0, 0, 80'000, 40'000};
  f.b.on_heartbeat("c", hb, f.t0);
  CHECK_FALSE(f.b.tick(f.t0).views);
  CHECK_FALSE(f.c.tick(f.t0).views);
  CHECK(f.b.latest_view() == first);
  // a hears it and proposes.
  f.a.on_heartbeat("c", hb, f.t0);
  CHECK(f.a.tick(f.t0).views);
  CHECK(f.a.latest_view().pace == Pace{80'000, 40'000});
}

TEST_CASE("a new pace waits until the newest view is in force, so one pace view comes per lead at most",
          "[peer][membership][pace][unit]") {
  Federation f;
  for (auto* s : f.all) s->note_own_pace(Pace{20'000, 40'000});
  exchange(f.all, f.t0);
  const View first = f.a.latest_view();
  // No site has reached the view's round yet.
  f.c.note_own_pace(Pace{80'000, 40'000});
  exchange(f.all, f.t0);
  CHECK(f.a.latest_view() == first);
  for (auto* s : f.all) s->note_own_round(first.effective_round);
  exchange(f.all, f.t0);
  CHECK(f.a.latest_view().id == first.id + 1);
  CHECK(f.a.latest_view().pace == Pace{80'000, 40'000});
}

TEST_CASE("a view for new members with a member not yet measured carries no pace, not the others' figures",
          "[peer][membership][pace][unit]") {
  Federation f;
  f.a.note_own_pace(Pace{20'000, 40'000});
  f.b.note_own_pace(Pace{90'000, 35'000});
  f.c.note_own_pace(Pace{0, 50'000});  // c heard no echo yet
  exchange(f.all, f.t0);
  // The first member amends it as soon as c reports a round trip; until then nobody proposes a pace.
  REQUIRE(f.a.latest_view().members == std::vector<std::string>{"a", "b", "c"});
  CHECK(f.a.latest_view().id == 1);
  CHECK_FALSE(f.a.latest_view().pace.measured());
}

TEST_CASE("a view that gathers the members before any site ran it gets its measured pace from the same round",
          "[peer][membership][pace][unit]") {
  Federation f;
  // The members meet before their figures are measured: the view that gathers them carries none.
  exchange(f.all, f.t0);
  const View unmeasured = f.a.latest_view();
  REQUIRE(unmeasured.members == std::vector<std::string>{"a", "b", "c"});
  REQUIRE_FALSE(unmeasured.pace.measured());
  for (auto* s : f.all) CHECK(s->awaits_pace());

  // Step times from the warm-up and two of three round trips: the figures are not complete yet.
  f.a.note_own_pace(Pace{20'000, 40'000});
  f.b.note_own_pace(Pace{90'000, 35'000});
  f.c.note_own_pace(Pace{0, 50'000});
  exchange(f.all, f.t0);
  CHECK(f.a.latest_view() == unmeasured);

  // c measures its round trip: only the first member, a, amends the view.
  f.c.note_own_pace(Pace{60'000, 50'000});
  HeartbeatInfo hb{f.c.incarnation(), f.c.newest_round(), 1, 0, 0, 60'000, 50'000};
  f.b.on_heartbeat("c", hb, f.t0);
  CHECK_FALSE(f.b.tick(f.t0).views);
  CHECK_FALSE(f.c.tick(f.t0).views);
  f.a.on_heartbeat("c", hb, f.t0);
  CHECK(f.a.tick(f.t0).views);
  exchange(f.all, f.t0);

  const View amended = f.a.latest_view();
  CHECK(amended.id == unmeasured.id + 1);
  CHECK(amended.members == unmeasured.members);
  CHECK(amended.pace == Pace{90'000, 50'000});
  // The same round: whichever of the two a site started on, it starts there, and the amendment is the
  // view in force from that round on at every site; the unmeasured one is in force at no round.
  CHECK(amended.effective_round == unmeasured.effective_round);
  for (auto* s : f.all) {
    CHECK(s->latest_view() == amended);
    CHECK(s->view_for(unmeasured.effective_round) == amended);
    CHECK(s->view_for(unmeasured.effective_round + 100) == amended);
    CHECK_FALSE(s->awaits_pace());
  }
  // Measured now: figures that move on are announced by the rule for a running federation only.
  f.c.note_own_pace(Pace{200'000, 50'000});
  exchange(f.all, f.t0);
  CHECK(f.a.latest_view() == amended);
}

TEST_CASE("a member whose figures are late holds up the amendment for twice the heartbeat timeout, no longer",
          "[peer][membership][pace][unit]") {
  Federation f;
  exchange(f.all, f.t0);
  const View unmeasured = f.a.latest_view();
  REQUIRE_FALSE(unmeasured.pace.measured());
  // c has not timed its steps yet (its warm-up is slow); a and b have their figures.
  f.a.note_own_pace(Pace{20'000, 40'000});
  f.b.note_own_pace(Pace{90'000, 35'000});
  f.c.note_own_pace(Pace{60'000, 0});
  exchange(f.all, f.t0);
  CHECK(f.a.latest_view() == unmeasured);
  // Just short of twice the heartbeat timeout (1 s here) since a first saw the view await its pace.
  const auto patient = f.t0 + 2000ms - 1ms;
  // (b and c keep being heard, so that nobody is declared dead meanwhile.)
  for (const auto* name : {"b", "c"}) f.a.heard_from(name, patient);
  CHECK_FALSE(f.a.tick(patient).views);
  // Then the figures reported so far: the largest round trip, the largest step time known.
  const auto late = f.t0 + 2000ms;
  for (const auto* name : {"b", "c"}) f.a.heard_from(name, late);
  CHECK(f.a.tick(late).views);
  const View amended = f.a.latest_view();
  CHECK(amended.pace == Pace{90'000, 40'000});
  CHECK(amended.effective_round == unmeasured.effective_round);
  CHECK(amended.members == unmeasured.members);
}

TEST_CASE("once a site runs the view's round, its unmeasured pace is not amended: the pace comes a lead later",
          "[peer][membership][pace][unit]") {
  Federation f;
  exchange(f.all, f.t0);
  const View unmeasured = f.a.latest_view();
  REQUIRE_FALSE(unmeasured.pace.measured());
  // c started on it (its wait for the pace ran out, say) and reports its round.
  f.c.note_own_round(unmeasured.effective_round);
  CHECK_FALSE(f.c.awaits_pace());
  for (auto* s : f.all) s->note_own_pace(Pace{20'000, 40'000});
  exchange(f.all, f.t0);
  for (auto* s : f.all) CHECK_FALSE(s->awaits_pace());
  // The pace is announced ahead of its round, as in a running federation.
  const View paced = f.a.latest_view();
  CHECK(paced.id == unmeasured.id + 1);
  CHECK(paced.pace == Pace{20'000, 40'000});
  CHECK(paced.effective_round == unmeasured.effective_round + 5);
  for (auto* s : f.all) CHECK(s->view_for(unmeasured.effective_round) == unmeasured);
}

TEST_CASE("a site that runs a round itself, or hears a round within the lead of the view's, awaits no amendment",
          "[peer][membership][pace][unit]") {
  const auto t0 = Clock::now();
  // A site training alone at its first round (--min-sites 1) when another one joins.
  Membership a(config("a"), t0), b(config("b"), t0);
  a.note_own_round(0);
  a.on_hello(b.hello(), t0);
  exchange({&a, &b}, t0);
  REQUIRE(a.latest_view().size() == 2);
  CHECK_FALSE(a.awaits_pace());
  CHECK(b.awaits_pace());  // b cannot tell yet: the first round a ran is round 0
  // One round on, a's report tells b that the view is no longer a full lead ahead of every round.
  a.note_own_round(1);
  exchange({&a, &b}, t0);
  CHECK_FALSE(b.awaits_pace());
  // Without paces in the views nothing is awaited.
  Membership c(config("c", false), t0), d(config("d", false), t0);
  c.on_hello(d.hello(), t0);
  exchange({&c, &d}, t0);
  CHECK_FALSE(c.awaits_pace());
  CHECK_FALSE(d.awaits_pace());
}

TEST_CASE("conflicting proposals that differ only in pace settle on the same one at every site",
          "[peer][membership][pace][unit]") {
  const auto t0 = Clock::now();
  Membership a(config("a"), t0), b(config("b"), t0);
  View low = View::of({"a", "b"}, 1, 10, Pace{1'000, 40'000});
  View high = View::of({"a", "b"}, 1, 10, Pace{2'000, 40'000});
  a.on_members("x", MemberListInfo{{}, {low}, 0}, t0);
  b.on_members("x", MemberListInfo{{}, {high}, 0}, t0);
  a.on_members("x", MemberListInfo{{}, {high}, 0}, t0);
  b.on_members("x", MemberListInfo{{}, {low}, 0}, t0);
  CHECK(a.view_for(10) == high);
  CHECK(b.view_for(10) == high);
}

TEST_CASE("a view's pace survives the wire; one half measured or beyond an hour is malformed",
          "[peer][wire][pace][unit]") {
  MemberListInfo list{{}, {View::of({"a", "b"}, 3, 40, Pace{120'000, 40'000})}, 7};
  const auto decoded = decode_members(encode_members(list));
  REQUIRE(decoded);
  CHECK(*decoded == list);
  for (const Pace bad :
       {Pace{120'000, 0}, Pace{0, 40'000}, Pace{kMaxPaceMicros + 1, 40'000}, Pace{120'000, kMaxPaceMicros + 1}}) {
    MemberListInfo hostile{{}, {View::of({"a", "b"}, 3, 40, bad)}, 7};
    CHECK_FALSE(decode_members(encode_members(hostile)));
  }
  HeartbeatInfo hb{1, 2, 3, 4, 5, 120'000, 40'000};
  CHECK(decode_heartbeat(encode_heartbeat(hb)) == hb);
  hb.step_us = kMaxPaceMicros + 1;
  CHECK_FALSE(decode_heartbeat(encode_heartbeat(hb)));
}

namespace {

// A port that only records what the driver sends.
struct RecordingPort final : MembershipPort {
  void send_membership(const std::string&, MessageKind, std::string, Clock::time_point) override {}
  void member_restarted(const std::string&) override {}
  void member_joined(const std::string&) override {}
  void member_gone(const std::string&, bool) override {}
  void adopt_bootstraps() override {}
  void greet_bootstraps(const std::string&, Clock::time_point) override {}
  void membership_changed() override {}
};

}  // namespace

TEST_CASE("a member list with a bad pace is refused as malformed and changes nothing",
          "[peer][membership][pace][unit]") {
  RecordingPort port;
  const auto t0 = Clock::now();
  MembershipDriver driver(config("a"), MembershipTiming{}, port, t0);
  driver.on_hello(HelloInfo{"b", "tcp://127.0.0.1:1/b", "", 1, 0, {}, {}}, t0);
  const View before = driver.membership().latest_view();
  MemberListInfo hostile{{}, {View::of({"a", "b"}, 9, 40, Pace{120'000, 0})}, 7};
  const auto rejection = driver.on_message("b", MessageKind::kMembers, encode_members(hostile), t0);
  REQUIRE(rejection);
  CHECK(rejection->cause == RejectCause::kMalformed);
  CHECK(driver.membership().latest_view() == before);
  HeartbeatInfo hb{1, 0, 1, 0, 0, kMaxPaceMicros + 1, 40'000};
  const auto hb_rejection = driver.on_message("b", MessageKind::kHeartbeat, encode_heartbeat(hb), t0);
  REQUIRE(hb_rejection);
  CHECK(hb_rejection->cause == RejectCause::kMalformed);
}
