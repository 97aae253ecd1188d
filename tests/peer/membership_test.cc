#include <catch2/catch.hpp>

#include "peer/membership.h"
#include "tests/peer/membership_config.h"

using namespace meridian::peer;
using namespace std::chrono_literals;
using Clock = Membership::Clock;

namespace {

MembershipConfig config(const std::string& self, std::uint64_t incarnation = 1) {
  return meridian::peer::testing::membership_config(self, incarnation);
}

HelloInfo hello_of(const std::string& name, std::uint64_t inc = 1, std::uint64_t round = 0) {
  return {name, "tcp://127.0.0.1:1/" + name, "", inc, round, {}, {}};
}

// Runs gossip among the given memberships until no table changes (all-to-all exchange per pass). A
// site heard of through gossip is greeted, and answers, as the driver's connections do.
void gossip_until_quiet(std::vector<Membership*> sites, Clock::time_point now) {
  for (int pass = 0; pass < 20; ++pass) {
    bool changed = false;
    for (auto* from : sites)
      for (auto* to : sites) {
        if (from == to) continue;
        const auto change = to->on_members(from->self(), from->snapshot(), now);
        changed = change.any() || changed;
        for (const auto& name : change.heard_of)
          for (auto* other : sites)
            if (other->self() == name) {
              other->on_hello(to->hello(), now);
              to->on_hello(other->hello(), now);
              changed = true;
            }
      }
    for (auto* s : sites) changed = s->tick(now).any() || changed;
    if (!changed) return;
  }
  FAIL("gossip did not settle");
}

}  // namespace

TEST_CASE("members spread by gossip until all know all, and all agree on one view", "[peer][membership][unit]") {
  const auto t0 = Clock::now();
  Membership a(config("a"), t0), b(config("b"), t0), c(config("c"), t0), d(config("d"), t0);
  // Each newcomer only says hello to "a" (the bootstrap site).
  for (auto* s : {&b, &c, &d}) a.on_hello(s->hello(), t0);
  gossip_until_quiet({&a, &b, &c, &d}, t0);
  const std::vector<std::string> all{"a", "b", "c", "d"};
  for (auto* s : {&a, &b, &c, &d}) {
    CHECK(s->alive_names() == all);
    CHECK(s->latest_view().members == all);
    CHECK(s->latest_view() == a.latest_view());
  }
  // The view takes effect view_lead_rounds after the newest round anyone reported; before that the
  // sites still run in their old views.
  CHECK(a.latest_view().effective_round == 5);
  CHECK(a.view_for(4).id < a.latest_view().id);
  CHECK(a.view_for(5) == a.latest_view());
}

TEST_CASE("membership remembers when it last heard from each member, not from itself", "[peer][membership][unit]") {
  const auto t0 = Clock::now();
  Membership a(config("a"), t0);
  CHECK_FALSE(a.last_heard("a"));       // this site
  CHECK_FALSE(a.last_heard("nobody"));  // no record
  a.on_hello(hello_of("b"), t0 + 100ms);
  a.on_hello(hello_of("c"), t0 + 100ms);
  CHECK(a.last_heard("b") == t0 + 100ms);
  a.on_heartbeat("b", HeartbeatInfo{.incarnation = 1}, t0 + 700ms);
  CHECK(a.last_heard("b") == t0 + 700ms);
  CHECK(a.last_heard("c") == t0 + 100ms);  // silent since its hello
  // A dead member keeps the time it was last heard from.
  a.tick(t0 + 1500ms);
  REQUIRE_FALSE(a.is_alive("c"));
  CHECK(a.last_heard("c") == t0 + 100ms);
}

TEST_CASE("a silent member is declared dead after the timeout and before twice the timeout",
          "[peer][membership][unit]") {
  const auto t0 = Clock::now();
  Membership a(config("a"), t0);
  a.on_hello(hello_of("b"), t0);
  a.on_hello(hello_of("c"), t0);
  // Ticks every 100 ms (the heartbeat interval); c keeps talking, b falls silent at t0.
  std::optional<Clock::time_point> declared;
  for (auto t = t0; t < t0 + 2000ms; t += 100ms) {
    a.heard_from("c", t);
    auto change = a.tick(t);
    if (std::find(change.died.begin(), change.died.end(), "b") != change.died.end()) declared = t;
    CHECK(std::find(change.died.begin(), change.died.end(), "c") == change.died.end());
  }
  REQUIRE(declared);
  CHECK(*declared - t0 > 1000ms);
  CHECK(*declared - t0 < 2000ms);
  CHECK_FALSE(a.is_alive("b"));
  CHECK(a.alive_names() == std::vector<std::string>{"a", "c"});
  CHECK(a.latest_view().members == std::vector<std::string>{"a", "c"});
}

TEST_CASE("stale gossip does not revive a dead member; a restart with a higher incarnation does",
          "[peer][membership][unit]") {
  const auto t0 = Clock::now();
  Membership a(config("a"), t0);
  a.on_hello(hello_of("b", 5), t0);
  a.tick(t0 + 1500ms);
  REQUIRE_FALSE(a.is_alive("b"));
  MemberListInfo stale;
  stale.members = {{"b", "tcp://x", "", 5, MemberState::kAlive}};
  CHECK(a.on_members("c", stale, t0 + 1600ms).joined.empty());
  CHECK_FALSE(a.is_alive("b"));
  auto change = a.on_hello(hello_of("b", 6), t0 + 1700ms);
  CHECK(change.joined == std::vector<std::string>{"b"});
  CHECK(a.is_alive("b"));
}

TEST_CASE("a site declared dead falsely refutes with a higher incarnation", "[peer][membership][unit]") {
  const auto t0 = Clock::now();
  Membership b(config("b", 5), t0);
  MemberListInfo rumour;
  rumour.members = {{"b", "", "", 5, MemberState::kDead}};
  CHECK(b.on_members("a", rumour, t0).records);
  CHECK(b.incarnation() == 6);
  Membership a(config("a"), t0);
  a.on_hello(hello_of("b", 5), t0);
  a.tick(t0 + 1500ms);  // b has been silent here for longer than the timeout
  REQUIRE_FALSE(a.is_alive("b"));
  CHECK(a.on_members("b", b.snapshot(), t0 + 1500ms).joined == std::vector<std::string>{"b"});
}

TEST_CASE("another site's verdict 'dead' is refused; only this site's own timeout declares a death",
          "[peer][membership][unit]") {
  const auto t0 = Clock::now();
  Membership a(config("a"), t0);
  a.on_hello(hello_of("b"), t0);
  a.on_hello(hello_of("c"), t0);
  MemberListInfo verdict;
  verdict.members = {{"b", "tcp://127.0.0.1:1/b", "", 1, MemberState::kDead}};
  // b spoke to a 200 ms ago: c's verdict (a partition it was on the other side of, or a lie) is refused.
  a.heard_from("b", t0 + 800ms);
  auto change = a.on_members("c", verdict, t0 + 1000ms);
  CHECK_FALSE(change.records);
  REQUIRE(change.refused.size() == 1);
  CHECK(change.refused[0].cause == RejectCause::kUnvouched);
  CHECK(a.is_alive("b"));
  // Nor is it taken once b has been silent here for the timeout: a's own tick declares that.
  CHECK(a.on_members("c", verdict, t0 + 2000ms).died.empty());
  CHECK(a.is_alive("b"));
  CHECK(a.tick(t0 + 2000ms).died == std::vector<std::string>{"b", "c"});
}

TEST_CASE("a graceful leave removes the member at once", "[peer][membership][unit]") {
  const auto t0 = Clock::now();
  Membership a(config("a"), t0);
  a.on_hello(hello_of("b", 3), t0);
  a.tick(t0);
  REQUIRE(a.latest_view().members == std::vector<std::string>{"a", "b"});
  auto change = a.on_leave("b", LeaveInfo{3});
  CHECK(change.left == std::vector<std::string>{"b"});
  CHECK_FALSE(a.is_alive("b"));
  CHECK(a.tick(t0).views);
  CHECK(a.latest_view().members == std::vector<std::string>{"a"});
}

TEST_CASE("conflicting proposals for one view id resolve the same way everywhere", "[peer][membership][unit]") {
  const auto t0 = Clock::now();
  Membership a(config("a"), t0), b(config("b"), t0);
  const View va = View::of({"a", "b"}, 7, 20), vb = View::of({"a", "b", "c"}, 7, 20);
  MemberListInfo la, lb;
  la.views = {va};
  lb.views = {vb};
  a.on_members("x", la, t0);
  a.on_members("x", lb, t0);
  b.on_members("x", lb, t0);
  b.on_members("x", la, t0);
  CHECK(a.latest_view() == b.latest_view());
  CHECK(a.latest_view() == vb);
  // A view a site already runs in is not rewritten.
  Membership c(config("c"), t0);
  c.on_members("x", la, t0);
  c.note_own_round(25);
  c.on_members("x", lb, t0);
  CHECK(c.latest_view() == va);
  // A site that only heard of round 25 (from its peers, or from the checkpoint it resumed) has run in
  // neither: it takes the winner like everybody else.
  Membership d(config("d"), t0);
  d.on_members("x", la, t0);
  d.note_round(25);
  d.on_members("x", lb, t0);
  CHECK(d.latest_view() == vb);
}

TEST_CASE("a view proposed from a round its peers have run past is re-issued from theirs, and the proposer takes it",
          "[peer][membership][unit]") {
  const auto t0 = Clock::now();
  // a and b run at round 50 in view 2; c has just resumed from a checkpoint at round 30 and proposes
  // view 3 (it back in) from the stale round it knows.
  Membership a(config("a"), t0), c(config("c", 2), t0);
  MemberListInfo before;
  before.views = {View::of({"a", "b"}, 2, 20)};
  a.on_members("x", before, t0);
  c.on_members("x", before, t0);
  a.note_own_round(50);
  c.note_round(30);
  const View stale = View::of({"a", "b", "c"}, 3, 35);
  MemberListInfo proposal;
  proposal.views = {stale};
  c.on_members("x", proposal, t0);
  REQUIRE(c.latest_view() == stale);

  CHECK(a.on_members("c", c.snapshot(), t0).views);  // gossiped on: it changed
  const View reissued = a.latest_view();
  CHECK(reissued.id == 3);
  CHECK(reissued.members == stale.members);
  CHECK(reissued.effective_round > 50);
  c.on_members("a", a.snapshot(), t0);
  CHECK(c.latest_view() == reissued);
  // a runs rounds 50.. in view 2 and switches with everybody else at the re-issued round.
  CHECK(a.view_for(50).id == 2);
}

TEST_CASE("names outside the roster are never admitted", "[peer][membership][unit]") {
  auto cfg = config("a");
  cfg.admissible = [](const std::string& n) { return n != "mallory"; };
  Membership a(cfg, Clock::now());
  MemberListInfo list;
  list.members = {{"mallory", "tcp://x", "", 1, MemberState::kAlive}, {"b", "tcp://y", "", 1, MemberState::kAlive}};
  const auto change = a.on_members("b", list, Clock::now());
  CHECK(a.alive_names() == std::vector<std::string>{"a", "b"});
  REQUIRE(change.refused.size() == 1);
  CHECK(change.refused[0].cause == RejectCause::kInventedMember);
}

TEST_CASE(
    "a restart noticed before the death is announced as two views: without the old incarnation, then with the new",
    "[peer][membership][unit]") {
  const auto t0 = Clock::now();
  Membership a(config("a"), t0), b(config("b"), t0), c(config("c", 1), t0);
  for (auto* s : {&b, &c}) a.on_hello(s->hello(), t0);
  gossip_until_quiet({&a, &b, &c}, t0);
  const View before = a.latest_view();
  REQUIRE(before.members == std::vector<std::string>{"a", "b", "c"});
  for (auto* s : {&a, &b}) s->note_round(40);  // mid-run

  // c is killed and comes back with a higher incarnation well within the heartbeat timeout.
  Membership c2(config("c", 2), t0 + 200ms);
  auto change = a.on_hello(c2.hello(), t0 + 200ms);
  CHECK(change.joined == std::vector<std::string>{"c"});
  CHECK(change.restarted == std::vector<std::string>{"c"});  // the transport reconnects to it
  CHECK(a.is_alive("c"));
  a.tick(t0 + 300ms);
  const View without = a.latest_view();
  CHECK(without.id == before.id + 1);
  CHECK(without.members == std::vector<std::string>{"a", "b"});
  a.tick(t0 + 400ms);
  const View with = a.latest_view();
  CHECK(with.id == before.id + 2);
  CHECK(with.members == std::vector<std::string>{"a", "b", "c"});
  // Each is in force for at least one round, in order, after the newest round reported.
  CHECK(without.effective_round > 40);
  CHECK(with.effective_round > without.effective_round);
  CHECK(a.view_for(with.effective_round - 1) == without);

  // b hears both the new incarnation and a's views in one gossip: it proposes nothing of its own.
  b.on_members("a", a.snapshot(), t0 + 450ms);
  CHECK_FALSE(b.tick(t0 + 500ms).views);
  CHECK(b.latest_view() == with);
  // Then c's own hello reaches b: the restart a announced is the one b now sees.
  CHECK(b.on_hello(c2.hello(), t0 + 500ms).restarted == std::vector<std::string>{"c"});
  CHECK_FALSE(b.tick(t0 + 550ms).views);
  CHECK(b.latest_view() == with);
  // And a quiet federation proposes nothing more.
  CHECK_FALSE(a.tick(t0 + 600ms).views);
}

TEST_CASE("after a partition each side keeps its own view of the id both used, then all agree on the next",
          "[peer][membership][unit]") {
  const auto t0 = Clock::now();
  Membership a(config("a"), t0), b(config("b"), t0);
  // Each side proposed view 5 without the other; a runs in its own from a redo, before its round.
  const View mine = View::of({"a", "x"}, 5, 40), theirs = View::of({"b", "y"}, 5, 48);
  MemberListInfo la, lb;
  la.views = {mine};
  lb.views = {theirs};
  a.on_members("x", la, t0);
  a.on_members("x", lb, t0);  // greater effective round, but it leaves a out
  CHECK(a.latest_view() == mine);
  b.on_members("x", lb, t0);
  b.on_members("x", la, t0);
  CHECK(b.latest_view() == theirs);
  // The view with everybody that both then propose resolves the usual way.
  const View all_a = View::of({"a", "b", "x", "y"}, 6, 60), all_b = View::of({"a", "b", "x", "y"}, 6, 64);
  la.views = {all_a};
  lb.views = {all_b};
  for (auto* s : {&a, &b}) {
    s->on_members("x", la, t0);
    s->on_members("x", lb, t0);
  }
  CHECK(a.latest_view() == all_b);
  CHECK(b.latest_view() == all_b);
}
