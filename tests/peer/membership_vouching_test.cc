// Who may say what in the membership (peer/membership.h): a site's own state comes from that site
// alone, deaths from this site's own timeout, leaving from the member or this site's roster, and
// incarnations move one plausible step at a time without wrapping. Each refusal is returned for the
// transport to count.
#include <algorithm>
#include <limits>

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

MemberListInfo one_record(const std::string& name, std::uint64_t inc, MemberState state) {
  MemberListInfo list;
  list.members = {{name, "tcp://127.0.0.1:1/" + name, "", inc, state}};
  return list;
}

bool refused_for(const MembershipChange& change, RejectCause cause) {
  return change.refused.size() == 1 && change.refused[0].cause == cause;
}

// a with live members b and c (incarnation 1), and a view of all three.
Membership federation_at_a(Clock::time_point t0) {
  Membership a(config("a"), t0);
  a.on_hello(hello_of("b"), t0);
  a.on_hello(hello_of("c"), t0);
  a.tick(t0);
  REQUIRE(a.latest_view().members == std::vector<std::string>{"a", "b", "c"});
  return a;
}

}  // namespace

TEST_CASE("another site's 'left' never removes a member; the member's own leave does", "[peer][membership][unit]") {
  const auto t0 = Clock::now();
  Membership a = federation_at_a(t0);
  for (const std::uint64_t inc : {1, 2}) {
    const auto change = a.on_members("c", one_record("b", inc, MemberState::kLeft), t0 + 100ms);
    CHECK(refused_for(change, RejectCause::kUnvouched));
    CHECK(change.left.empty());
    CHECK(a.is_alive("b"));
    CHECK(a.find("b")->incarnation == 1);
  }
  a.heard_from("b", t0 + 100ms);
  a.heard_from("c", t0 + 100ms);
  CHECK_FALSE(a.tick(t0 + 200ms).views);
  CHECK(a.latest_view().members == std::vector<std::string>{"a", "b", "c"});
  // b's own word: its leave on its own connection.
  CHECK(a.on_leave("b", LeaveInfo{1}).left == std::vector<std::string>{"b"});
  CHECK_FALSE(a.is_alive("b"));
}

TEST_CASE("a roster change at another site does not make this site mark a member left", "[peer][membership][unit]") {
  const auto t0 = Clock::now();
  Membership a = federation_at_a(t0);
  Membership c(config("c"), t0);
  c.on_hello(hello_of("a"), t0);
  c.on_hello(hello_of("b"), t0);
  // c's operator took b out of c's roster; a's roster still lists b.
  REQUIRE(c.expel("b").left == std::vector<std::string>{"b"});
  const auto change = a.on_members("c", c.snapshot(), t0 + 100ms);
  CHECK(refused_for(change, RejectCause::kUnvouched));
  CHECK(a.is_alive("b"));
  a.heard_from("b", t0 + 100ms);
  a.heard_from("c", t0 + 100ms);
  CHECK_FALSE(a.tick(t0 + 200ms).views);
  CHECK(a.latest_view().members == std::vector<std::string>{"a", "b", "c"});
}

TEST_CASE("one member's 'dead' never takes out a member this site hears, in records or views",
          "[peer][membership][unit]") {
  const auto t0 = Clock::now();
  Membership a = federation_at_a(t0);
  for (auto t = t0; t < t0 + 5000ms; t += 250ms) {
    a.heard_from("b", t);
    a.heard_from("c", t);
    // c repeats its verdict on b, at b's incarnation and above.
    CHECK(refused_for(a.on_members("c", one_record("b", 1, MemberState::kDead), t), RejectCause::kUnvouched));
    CHECK(refused_for(a.on_members("c", one_record("b", 7, MemberState::kDead), t), RejectCause::kUnvouched));
    const auto change = a.tick(t);
    CHECK(change.died.empty());
    CHECK_FALSE(change.views);
  }
  CHECK(a.is_alive("b"));
  CHECK(a.latest_view().members == std::vector<std::string>{"a", "b", "c"});
}

TEST_CASE("only a member raises its own incarnation, one step at a time unless it restarts",
          "[peer][membership][unit]") {
  const auto t0 = Clock::now();
  Membership a = federation_at_a(t0);
  // Relayed: never, whatever the step.
  for (const std::uint64_t inc : {std::uint64_t{2}, std::uint64_t{1000}, std::numeric_limits<std::uint64_t>::max()}) {
    CHECK(refused_for(a.on_members("c", one_record("b", inc, MemberState::kAlive), t0), RejectCause::kUnvouched));
    CHECK(a.find("b")->incarnation == 1);
  }
  // Its own heartbeats: one step (a refutation) is taken, more is refused.
  CHECK(refused_for(a.on_heartbeat("b", HeartbeatInfo{.incarnation = 3}, t0), RejectCause::kIncarnation));
  CHECK(a.find("b")->incarnation == 1);
  CHECK(a.on_heartbeat("b", HeartbeatInfo{.incarnation = 2}, t0).refused.empty());
  CHECK(a.find("b")->incarnation == 2);
  // Its own record in its own table, the same.
  CHECK(refused_for(a.on_members("b", one_record("b", 50, MemberState::kAlive), t0), RejectCause::kIncarnation));
  CHECK(a.find("b")->incarnation == 2);
  // Its hello: a restart, any step.
  const auto change = a.on_hello(hello_of("b", 1'000'000), t0);
  CHECK(change.refused.empty());
  CHECK(change.restarted == std::vector<std::string>{"b"});
  CHECK(a.find("b")->incarnation == 1'000'000);
}

TEST_CASE("a member declared dead here comes back on its own word at any incarnation", "[peer][membership][unit]") {
  const auto t0 = Clock::now();
  Membership a(config("a"), t0);
  a.on_hello(hello_of("b", 5), t0);
  a.tick(t0 + 1500ms);
  REQUIRE_FALSE(a.is_alive("b"));
  // While apart, b refuted the verdicts of others several times.
  const auto change = a.on_members("b", one_record("b", 9, MemberState::kAlive), t0 + 1600ms);
  CHECK(change.refused.empty());
  CHECK(change.joined == std::vector<std::string>{"b"});
}

TEST_CASE("refutations saturate at the largest incarnation and never wrap", "[peer][membership][unit]") {
  const auto top = std::numeric_limits<std::uint64_t>::max();
  const auto t0 = Clock::now();
  Membership b(config("b", top), t0);
  b.on_members("a", one_record("b", top, MemberState::kDead), t0);
  CHECK(b.incarnation() == top);
  Membership c(config("c", top - 1), t0);
  CHECK(c.on_members("a", one_record("c", top - 1, MemberState::kDead), t0).records);
  CHECK(c.incarnation() == top);
  c.on_members("a", one_record("c", top, MemberState::kDead), t0 + 2000ms);
  CHECK(c.incarnation() == top);
}

TEST_CASE("a site refutes a death at its own incarnation once per half timeout; a leave or one above it is refused",
          "[peer][membership][unit]") {
  const auto t0 = Clock::now();
  Membership b(config("b", 5), t0);
  // Above its own: nobody can hold that incarnation of b; refuting would let the sender drive it up.
  CHECK(refused_for(b.on_members("h", one_record("b", 900, MemberState::kDead), t0), RejectCause::kIncarnation));
  CHECK(b.incarnation() == 5);
  // "You left": only b leaves, so there is nothing to refute.
  CHECK(refused_for(b.on_members("h", one_record("b", 5, MemberState::kLeft), t0), RejectCause::kUnvouched));
  CHECK(b.incarnation() == 5);
  CHECK(b.on_members("h", one_record("b", 5, MemberState::kDead), t0).records);
  CHECK(b.incarnation() == 6);
  // Repeated at once: no second step until half the timeout has passed (its heartbeats, sent more
  // often, carry each step).
  CHECK_FALSE(b.on_members("h", one_record("b", 6, MemberState::kDead), t0 + 100ms).records);
  CHECK(b.incarnation() == 6);
  CHECK(b.on_members("h", one_record("b", 6, MemberState::kDead), t0 + 500ms).records);
  CHECK(b.incarnation() == 7);
}

TEST_CASE("a view or record naming a site outside the roster is refused", "[peer][membership][unit]") {
  const auto t0 = Clock::now();
  auto cfg = config("a");
  cfg.admissible = [](const std::string& n) { return n == "a" || n == "b" || n == "c"; };
  Membership a(cfg, t0);
  a.on_hello(hello_of("b"), t0);
  a.tick(t0);
  const View before = a.latest_view();
  MemberListInfo list;
  list.views = {View::of({"a", "b", "ghost"}, before.id + 1, 40)};
  const auto change = a.on_members("b", list, t0);
  CHECK(refused_for(change, RejectCause::kInventedMember));
  CHECK_FALSE(change.views);
  CHECK(a.latest_view() == before);
  // A view of rostered names is taken.
  list.views = {View::of({"a", "b", "c"}, before.id + 1, 40)};
  CHECK(a.on_members("b", list, t0).views);
}

TEST_CASE("a site heard of only through gossip is one to contact, not a member, until its own hello",
          "[peer][membership][unit]") {
  const auto t0 = Clock::now();
  Membership a = federation_at_a(t0);
  const auto change = a.on_members("c", one_record("d", 4, MemberState::kAlive), t0);
  CHECK(change.heard_of == std::vector<std::string>{"d"});
  CHECK(change.joined.empty());
  CHECK_FALSE(a.is_alive("d"));
  REQUIRE(a.find("d"));  // its address, to connect to
  CHECK(a.find("d")->address == "tcp://127.0.0.1:1/d");
  const auto snapshot = a.snapshot();
  CHECK(std::none_of(snapshot.members.begin(), snapshot.members.end(),
                     [](const MemberRecord& r) { return r.name == "d"; }));
  a.heard_from("b", t0);
  CHECK_FALSE(a.tick(t0).views);
  // Its own hello, at whatever incarnation, makes it a member.
  CHECK(a.on_hello(hello_of("d", 2), t0).joined == std::vector<std::string>{"d"});
  CHECK(a.tick(t0).views);
  CHECK(a.latest_view().members == std::vector<std::string>{"a", "b", "c", "d"});
}

namespace {

// A member list that proposes `v`, from a sender at `round`.
MemberListInfo one_view(const View& v, std::uint64_t round = 0) {
  MemberListInfo list;
  list.views = {v};
  list.round = round;
  return list;
}

}  // namespace

TEST_CASE("a member only heard of that the newest view lists is not proposed out before its own timeout",
          "[peer][membership][unit]") {
  const auto t0 = Clock::now();
  Membership b(config("b"), t0);
  b.on_hello(hello_of("a"), t0);
  b.tick(t0);
  REQUIRE(b.latest_view().members == std::vector<std::string>{"a", "b"});
  // a has heard from c (c's hello to b is still on its way): a's table names c, and a's view holds it.
  CHECK(b.on_members("a", one_record("c", 1, MemberState::kAlive), t0).heard_of == std::vector<std::string>{"c"});
  const View with_c = View::of({"a", "b", "c"}, b.latest_view().id + 1, 20);
  b.on_members("a", one_view(with_c), t0 + 10ms);
  REQUIRE(b.snapshot().views.back() == with_c);
  for (auto t = t0 + 100ms; t <= t0 + 900ms; t += 200ms) {
    b.heard_from("a", t);
    CHECK_FALSE(b.tick(t).views);
    CHECK(b.snapshot().views.back() == with_c);
  }
  // No hello from c within the heartbeat timeout: nothing says it is there, and b proposes it out.
  b.heard_from("a", t0 + 1100ms);
  CHECK(b.tick(t0 + 1100ms).views);
  CHECK(b.snapshot().views.back().members == std::vector<std::string>{"a", "b"});
}

TEST_CASE("a site proposes no view while a member its peer holds alive is only heard of and in no view it holds",
          "[peer][membership][unit]") {
  const auto t0 = Clock::now();
  // The first formation: a has heard from b, c and d; c has heard from a only (its links to b and d
  // are slower), and a's table reaches c before any view of a's does.
  Membership a(config("a"), t0);
  for (const auto* name : {"b", "c", "d"}) a.on_hello(hello_of(name), t0);
  Membership c(config("c"), t0);
  c.on_hello(hello_of("a"), t0);
  CHECK(c.on_members("a", a.snapshot(), t0).heard_of == std::vector<std::string>{"b", "d"});
  // c's tick comes first: a view of a and c would drop b and d, which a hears.
  CHECK_FALSE(c.tick(t0 + 10ms).views);
  CHECK(c.latest_view().id == 0);
  REQUIRE(a.tick(t0 + 10ms).views);
  REQUIRE(a.latest_view().members == std::vector<std::string>{"a", "b", "c", "d"});
  // Each hears the other's gossip: a has nothing to refuse, and c takes a's view.
  c.heard_from("a", t0 + 20ms);
  CHECK(a.on_members("c", c.snapshot(), t0 + 20ms).refused.empty());
  CHECK(c.on_members("a", a.snapshot(), t0 + 20ms).refused.empty());
  CHECK(c.latest_view() == a.latest_view());
  CHECK_FALSE(c.tick(t0 + 30ms).views);
  c.on_hello(hello_of("b"), t0 + 300ms);
  c.on_hello(hello_of("d"), t0 + 400ms);
  c.heard_from("a", t0 + 400ms);
  CHECK_FALSE(c.tick(t0 + 400ms).views);
  CHECK(c.latest_view() == a.latest_view());

  // A site whose hello never comes holds proposals back for one heartbeat timeout, once; a site the
  // relay holds dead holds nothing back.
  Membership e(config("e"), t0);
  e.on_hello(hello_of("a"), t0);
  MemberListInfo table;
  table.members = {{"b", "tcp://127.0.0.1:1/b", "", 1, MemberState::kAlive},
                   {"f", "tcp://127.0.0.1:1/f", "", 1, MemberState::kDead}};
  CHECK(e.on_members("a", table, t0).heard_of == std::vector<std::string>{"b", "f"});
  e.heard_from("a", t0 + 900ms);
  CHECK_FALSE(e.tick(t0 + 900ms).views);
  e.heard_from("a", t0 + 1100ms);
  CHECK(e.tick(t0 + 1100ms).views);
  CHECK(e.latest_view().members == std::vector<std::string>{"a", "e"});
  Membership g(config("g"), t0);
  g.on_hello(hello_of("a"), t0);
  MemberListInfo dead_only;
  dead_only.members = {table.members[1]};
  g.on_members("a", dead_only, t0);
  CHECK(g.tick(t0 + 10ms).views);
  CHECK(g.latest_view().members == std::vector<std::string>{"a", "g"});
}

TEST_CASE("a view that drops a member this site hears is held back, counted once, and taken when its own timeout agrees",
          "[peer][membership][unit]") {
  const auto t0 = Clock::now();
  Membership a = federation_at_a(t0);
  const View before = a.latest_view();
  const View without_b = View::of({"a", "c"}, before.id + 1, 20);
  CHECK(refused_for(a.on_members("c", one_view(without_b), t0 + 100ms), RejectCause::kUnjustifiedView));
  // Repeated by gossip: held back still, not counted again.
  for (auto t = t0 + 200ms; t < t0 + 900ms; t += 200ms) {
    a.heard_from("b", t);
    a.heard_from("c", t);
    const auto change = a.on_members("c", one_view(without_b), t);
    CHECK(change.refused.empty());
    CHECK_FALSE(change.views);
    CHECK_FALSE(a.tick(t).views);
    CHECK(a.latest_view() == before);
  }
  // b falls silent: this site's own timeout declares it dead, and the proposal it held back is the
  // view it takes (the proposer's round), not a rival of its own.
  a.heard_from("c", t0 + 1900ms);
  const auto change = a.tick(t0 + 1900ms);
  CHECK(change.died == std::vector<std::string>{"b"});
  CHECK(change.views);
  CHECK(a.latest_view() == without_b);
  CHECK_FALSE(a.tick(t0 + 1950ms).views);
}

TEST_CASE("a view that drops the receiving site itself is held back there once it runs rounds",
          "[peer][membership][unit]") {
  const auto t0 = Clock::now();
  Membership b(config("b"), t0);
  b.on_hello(hello_of("a"), t0);
  b.on_hello(hello_of("c"), t0);
  b.tick(t0);
  const View before = b.latest_view();
  REQUIRE(before.members == std::vector<std::string>{"a", "b", "c"});
  b.note_own_round(3);
  CHECK(refused_for(b.on_members("c", one_view(View::of({"a", "c"}, before.id + 1, 20)), t0),
                    RejectCause::kUnjustifiedView));
  CHECK(b.latest_view() == before);
  CHECK_FALSE(b.tick(t0 + 100ms).views);
  // A process that runs no round yet (a restart) takes the views that left its previous incarnation
  // out: they say where its peers wait for it.
  Membership b2(config("b", 2), t0);
  b2.on_members("a", one_view(before), t0);
  const View without_old_b = View::of({"a", "c"}, before.id + 1, 20);
  CHECK(b2.on_members("a", one_view(without_old_b), t0).refused.empty());
  CHECK(b2.latest_view() == without_old_b);
}

TEST_CASE("a view that a member's own leave or restart justifies is taken at once", "[peer][membership][unit]") {
  const auto t0 = Clock::now();
  Membership a = federation_at_a(t0);
  const View before = a.latest_view();
  const View without_c = View::of({"a", "b"}, before.id + 1, 20);
  CHECK(refused_for(a.on_members("b", one_view(without_c), t0), RejectCause::kUnjustifiedView));
  // c's own leave, on its own connection.
  const auto change = a.on_leave("c", LeaveInfo{1});
  CHECK(change.left == std::vector<std::string>{"c"});
  CHECK(change.views);
  CHECK(a.latest_view() == without_c);

  // A restart: b's new incarnation greets a after a peer already proposed the view without its old one.
  const View without_old_b = View::of({"a"}, without_c.id + 1, 30);
  CHECK(refused_for(a.on_members("x", one_view(without_old_b), t0), RejectCause::kUnjustifiedView));
  const auto restart = a.on_hello(hello_of("b", 2), t0 + 100ms);
  CHECK(restart.restarted == std::vector<std::string>{"b"});
  CHECK(a.latest_view() == without_old_b);
}

TEST_CASE("a conflicting proposal never drops a member this site hears; the larger view wins everywhere",
          "[peer][membership][unit]") {
  const auto t0 = Clock::now();
  Membership a = federation_at_a(t0);
  const View held = a.latest_view();
  // Same id, a later round, b left out: refused, whatever its round.
  const View rival = View::of({"a", "c"}, held.id, held.effective_round + 3);
  CHECK(refused_for(a.on_members("c", one_view(rival), t0), RejectCause::kUnjustifiedView));
  CHECK(a.latest_view() == held);
  // Two honest proposals for one id, one made before a joiner was heard of: the one with more
  // members wins on both sides, whatever their rounds.
  Membership x(config("x"), t0), y(config("y"), t0);
  const View early = View::of({"a", "b"}, 3, 40), with_joiner = View::of({"a", "b", "d"}, 3, 30);
  x.on_members("a", one_view(early), t0);
  x.on_members("b", one_view(with_joiner), t0);
  y.on_members("b", one_view(with_joiner), t0);
  y.on_members("a", one_view(early), t0);
  CHECK(x.latest_view() == with_joiner);
  CHECK(y.latest_view() == with_joiner);
}

TEST_CASE("a round is believed only from its own site and within the window of the members' rounds",
          "[peer][membership][unit]") {
  const auto t0 = Clock::now();
  Membership a = federation_at_a(t0);
  a.note_own_round(100);
  CHECK(a.on_heartbeat("b", HeartbeatInfo{.incarnation = 1, .round = 101}, t0).refused.empty());
  CHECK(a.on_heartbeat("c", HeartbeatInfo{.incarnation = 1, .round = 102}, t0).refused.empty());
  CHECK(a.newest_round() == 102);
  // What a site reports is its own round, not the newest it heard of.
  CHECK(a.reported_round() == 100);
  CHECK(a.hello().round == 100);
  CHECK(a.snapshot().round == 100);

  const std::uint64_t far = 1'000'000'000;
  CHECK(refused_for(a.on_heartbeat("c", HeartbeatInfo{.incarnation = 1, .round = far}, t0),
                    RejectCause::kImplausibleRound));
  MemberListInfo list;
  list.round = far;
  CHECK(refused_for(a.on_members("c", list, t0), RejectCause::kImplausibleRound));
  CHECK(refused_for(a.on_hello(hello_of("c", 1, far), t0), RejectCause::kImplausibleRound));
  // A site that is not a member has no round here at all, and a far one is counted.
  CHECK(refused_for(a.on_heartbeat("h", HeartbeatInfo{.incarnation = 1, .round = far}, t0),
                    RejectCause::kImplausibleRound));
  CHECK(a.on_heartbeat("h", HeartbeatInfo{.incarnation = 1, .round = 103}, t0).refused.empty());
  CHECK(a.newest_round() == 102);
  // A view starting far ahead is refused the same way; so the next view starts a lead after 102.
  CHECK(refused_for(a.on_members("c", one_view(View::of({"a", "b", "c"}, a.latest_view().id + 1, far), 102), t0),
                    RejectCause::kImplausibleRound));
  a.on_hello(hello_of("d"), t0);
  a.tick(t0);
  CHECK(a.latest_view().members == std::vector<std::string>{"a", "b", "c", "d"});
  CHECK(a.latest_view().effective_round == 102 + 5);
  // Within the window a site may run ahead (it is believed).
  const std::uint64_t ahead = a.reported_round() + 5 * kRoundWindowLeads;
  CHECK(a.on_heartbeat("b", HeartbeatInfo{.incarnation = 1, .round = ahead}, t0).refused.empty());
  CHECK(a.newest_round() == ahead);
}

TEST_CASE("a site with no round of its own takes the federation's from the first report", "[peer][membership][unit]") {
  const auto t0 = Clock::now();
  Membership d(config("d"), t0);
  CHECK(d.on_hello(hello_of("a", 1, 50'000), t0).refused.empty());
  CHECK(d.newest_round() == 50'000);
  CHECK(d.on_hello(hello_of("b", 1, 50'001), t0).refused.empty());
  CHECK(d.newest_round() == 50'001);
  // A third member far ahead is outvoted by the first two.
  CHECK(refused_for(d.on_hello(hello_of("c", 1, 90'000'000), t0), RejectCause::kImplausibleRound));
  CHECK(d.newest_round() == 50'001);
}

TEST_CASE("members whose rounds run ahead of the window between two reports are believed again at the next one",
          "[peer][membership][unit]") {
  // A tiny model runs more rounds per heartbeat interval than the window allows: each member's next
  // report is beyond the window of the other's last one. The first is refused, but it stays that
  // member's claim, so the other's next report is judged against it and believed.
  const auto t0 = Clock::now();
  Membership d(config("d"), t0);
  const std::uint64_t window = kRoundWindowLeads * 8;
  REQUIRE(d.on_hello(hello_of("a", 1, 1000), t0).refused.empty());
  REQUIRE(d.on_hello(hello_of("b", 1, 1001), t0).refused.empty());
  const std::uint64_t b_now = 1001 + window + 50, a_now = b_now + 10;
  CHECK(refused_for(d.on_heartbeat("b", HeartbeatInfo{.incarnation = 1, .round = b_now}, t0),
                    RejectCause::kImplausibleRound));
  CHECK(d.on_heartbeat("a", HeartbeatInfo{.incarnation = 1, .round = a_now}, t0).refused.empty());
  CHECK(d.on_heartbeat("b", HeartbeatInfo{.incarnation = 1, .round = a_now + 1}, t0).refused.empty());
  CHECK(d.newest_round() == a_now + 1);
  // A lone member far ahead is still outvoted: its claim is the upper one of the two.
  CHECK(refused_for(d.on_heartbeat("b", HeartbeatInfo{.incarnation = 1, .round = 90'000'000}, t0),
                    RejectCause::kImplausibleRound));
  CHECK(d.newest_round() == a_now + 1);
}

TEST_CASE("where a member listens is its own word; another site's address for it is refused or only probed",
          "[peer][membership][unit]") {
  const auto t0 = Clock::now();
  Membership a = federation_at_a(t0);
  MemberListInfo list;
  list.members = {{"b", "tcp://10.9.9.9:1", "", 1, MemberState::kAlive}};
  CHECK(refused_for(a.on_members("c", list, t0), RejectCause::kUnvouched));
  CHECK(a.find("b")->address == "tcp://127.0.0.1:1/b");
  // b's own record, and its hello, move it.
  list.members = {{"b", "tcp://10.0.0.2:7000", "", 2, MemberState::kAlive}};
  CHECK(a.on_members("b", list, t0).refused.empty());
  CHECK(a.find("b")->address == "tcp://10.0.0.2:7000");
  // A site heard of only through another's gossip is at that address to be probed (a connection to
  // it must authenticate with its roster key), never gossiped on; its own hello says where it is.
  list.members = {{"d", "tcp://10.9.9.9:1", "", 1, MemberState::kAlive}};
  CHECK(a.on_members("c", list, t0).heard_of == std::vector<std::string>{"d"});
  const auto snapshot = a.snapshot();
  CHECK(std::none_of(snapshot.members.begin(), snapshot.members.end(),
                     [](const MemberRecord& r) { return r.name == "d"; }));
  CHECK(a.on_hello(hello_of("d"), t0).joined == std::vector<std::string>{"d"});
  CHECK(a.find("d")->address == "tcp://127.0.0.1:1/d");
}

TEST_CASE("a running site takes one view per interval that lists a site it has not heard from, and holds the rest "
          "back until that site is heard from",
          "[peer][membership][unit]") {
  const auto t0 = Clock::now();
  auto a_config = config("a");
  a_config.hearsay_view_interval = 10s;
  Membership a(a_config, t0);
  a.on_hello(hello_of("b"), t0);
  a.on_hello(hello_of("c"), t0);
  a.tick(t0);
  const View three = a.latest_view();
  REQUIRE(three.members == std::vector<std::string>{"a", "b", "c"});
  // A process that runs no round yet takes the federation's views as they come, however many.
  auto s_config = config("s");
  s_config.hearsay_view_interval = 10s;
  Membership starting(s_config, t0);
  starting.on_hello(hello_of("b"), t0);
  for (std::uint64_t id = 1; id <= 3; ++id)
    CHECK(starting.on_members("b", one_view(View::of({"b", "c", "d", "s"}, id, 20 * id)), t0).refused.empty());
  CHECK(starting.latest_view().id == 3);

  a.note_own_round(10);
  // h proposes a view with d, which a has never heard from (rostered, but it never started): the first
  // is taken on h's word, and never comes into force (d never holds it).
  const View with_d = View::of({"a", "b", "c", "d"}, three.id + 1, 30);
  const auto in_force = a.views_in_force();
  CHECK(a.on_members("h", one_view(with_d), t0 + 100ms).refused.empty());
  CHECK(a.latest_view() == with_d);
  CHECK(a.views_in_force() == in_force);
  // a's own proposal without d follows; h's next view with d, within the interval, is held back and
  // counted once however often it comes, and so is a rival for the id a holds (until d is heard from,
  // whatever the interval: a replaced view would part a from the members that keep it).
  a.heard_from("b", t0 + 200ms);
  a.heard_from("c", t0 + 200ms);
  REQUIRE(a.tick(t0 + 200ms).views);
  const View without_d = a.latest_view();
  REQUIRE(without_d.members == three.members);
  const View again = View::of({"a", "b", "c", "d"}, without_d.id + 1, 50);
  CHECK(refused_for(a.on_members("h", one_view(again), t0 + 300ms), RejectCause::kHearsayView));
  CHECK(a.on_members("h", one_view(again), t0 + 400ms).refused.empty());
  const View rival = View::of({"a", "b", "c", "d"}, without_d.id, without_d.effective_round);
  CHECK(refused_for(a.on_members("h", one_view(rival), t0 + 500ms), RejectCause::kHearsayView));
  CHECK(a.latest_view() == without_d);
  // A view listing a site a has heard from is no hearsay: taken at once.
  a.on_hello(hello_of("e"), t0 + 600ms);
  const View with_e = View::of({"a", "b", "c", "e"}, without_d.id + 1, 60);
  Membership a_copy = a;
  CHECK(a_copy.on_members("b", one_view(with_e), t0 + 600ms).refused.empty());
  CHECK(a_copy.latest_view() == with_e);
  // Once the interval has passed, the next input takes the new view held back; the rival stays out.
  a.on_members("b", MemberListInfo{}, t0 + 10200ms);
  CHECK(a.latest_view() == again);
  const auto held = a.views();
  CHECK(std::find(held.begin(), held.end(), without_d) != held.end());
  CHECK(std::find(held.begin(), held.end(), rival) == held.end());
}

TEST_CASE("a new pace for the same members is taken only when the members' own figures bear it out",
          "[peer][membership][unit]") {
  const auto t0 = Clock::now();
  auto a_config = config("a");
  a_config.agree_pace = true;
  Membership a(a_config, t0);
  a.note_own_pace(Pace{2000, 1000});
  for (const auto* name : {"b", "c"}) {
    a.on_hello(hello_of(name), t0);
    a.on_heartbeat(name, HeartbeatInfo{.incarnation = 1, .rtt_us = 1800, .step_us = 900}, t0);
  }
  a.tick(t0);
  const View three = a.latest_view();
  REQUIRE(three.members == std::vector<std::string>{"a", "b", "c"});
  REQUIRE(three.pace == Pace{2000, 1000});
  // c, not the view's first member, proposes the same members with a round trip a hundred times the
  // members' own: held back and counted once, however often it comes; and so is a rival for the id
  // held that differs only by such a pace (it would win the comparison).
  const View forged = View::of(three.members, three.id + 1, 40, Pace{200'000, 1000});
  CHECK(refused_for(a.on_members("c", one_view(forged), t0 + 100ms), RejectCause::kUnjustifiedView));
  CHECK(a.on_members("c", one_view(forged), t0 + 200ms).refused.empty());
  const View rival = View::of(three.members, three.id, three.effective_round, Pace{200'000, 1000});
  CHECK(refused_for(a.on_members("c", one_view(rival), t0 + 300ms), RejectCause::kUnjustifiedView));
  CHECK(a.latest_view() == three);
  // A pace without figures, against measured ones, is no better.
  CHECK(refused_for(a.on_members("c", one_view(View::of(three.members, three.id + 1, 40, Pace{})), t0 + 300ms),
                    RejectCause::kUnjustifiedView));
  // The members' figures move (b's round trip triples): the view that carries them is taken, from
  // whoever relays it.
  a.on_heartbeat("b", HeartbeatInfo{.incarnation = 1, .rtt_us = 6000, .step_us = 1000}, t0 + 400ms);
  const View moved = View::of(three.members, three.id + 1, 40, Pace{6000, 1000});
  CHECK(a.on_members("c", one_view(moved), t0 + 500ms).refused.empty());
  CHECK(a.latest_view() == moved);
  a.heard_from("b", t0 + 600ms);
  a.heard_from("c", t0 + 600ms);
  a.tick(t0 + 600ms);
  const auto held = a.views();
  CHECK(std::find(held.begin(), held.end(), forged) == held.end());
}

TEST_CASE("a change of members carries a pace only when the members' own figures bear it out",
          "[peer][membership][unit]") {
  const auto t0 = Clock::now();
  auto a_config = config("a");
  a_config.agree_pace = true;
  Membership a(a_config, t0);
  a.note_own_pace(Pace{2000, 1000});
  for (const auto* name : {"b", "c"}) {
    a.on_hello(hello_of(name), t0);
    a.on_heartbeat(name, HeartbeatInfo{.incarnation = 1, .rtt_us = 1800, .step_us = 900}, t0);
  }
  a.tick(t0);
  const View three = a.latest_view();
  REQUIRE(three.members == std::vector<std::string>{"a", "b", "c"});
  REQUIRE(three.pace == Pace{2000, 1000});
  for (const auto* name : {"b", "c"}) a.on_members(name, one_view(three), t0);
  REQUIRE(a.views_in_force().back() == three);
  // d joins. c races the honest proposal with its own: the same four members, but a round trip a
  // hundred times the members' own. a has no figures of d yet and judges by the others': held back
  // and counted once, however often it comes.
  a.on_hello(hello_of("d"), t0 + 100ms);
  const View forged = View::of({"a", "b", "c", "d"}, three.id + 1, 40, Pace{200'000, 1000});
  CHECK(refused_for(a.on_members("c", one_view(forged), t0 + 100ms), RejectCause::kUnjustifiedView));
  CHECK(a.on_members("c", one_view(forged), t0 + 200ms).refused.empty());
  CHECK(a.latest_view() == three);
  // d's own heartbeat does not bear it out either; the view with the figures of all four does, and
  // it comes into force once the others hold it.
  a.on_heartbeat("d", HeartbeatInfo{.incarnation = 1, .rtt_us = 2500, .step_us = 1000}, t0 + 300ms);
  CHECK(a.latest_view() == three);
  const View honest = View::of({"a", "b", "c", "d"}, three.id + 1, 40, Pace{2500, 1000});
  CHECK(a.on_members("b", one_view(honest), t0 + 400ms).refused.empty());
  CHECK(a.latest_view() == honest);
  for (const auto* name : {"b", "c", "d"}) a.on_members(name, one_view(honest), t0 + 500ms);
  CHECK(a.views_in_force().back() == honest);
  const auto held = a.views();
  CHECK(std::find(held.begin(), held.end(), forged) == held.end());
}

TEST_CASE("a change of members that keeps the pace of the view it follows is taken while the figures move",
          "[peer][membership][unit]") {
  const auto t0 = Clock::now();
  auto a_config = config("a");
  a_config.agree_pace = true;
  Membership a(a_config, t0);
  a.note_own_pace(Pace{2000, 1000});
  for (const auto* name : {"b", "c"}) {
    a.on_hello(hello_of(name), t0);
    a.on_heartbeat(name, HeartbeatInfo{.incarnation = 1, .rtt_us = 1800, .step_us = 900}, t0);
  }
  a.tick(t0);
  const View three = a.latest_view();
  REQUIRE(three.pace == Pace{2000, 1000});
  // b's round trip triples and d joins: the view of the four with the figures of all four is taken.
  a.on_heartbeat("b", HeartbeatInfo{.incarnation = 1, .rtt_us = 6000, .step_us = 1000}, t0 + 100ms);
  a.on_hello(hello_of("d"), t0 + 100ms);
  a.on_heartbeat("d", HeartbeatInfo{.incarnation = 1, .rtt_us = 1800, .step_us = 900}, t0 + 100ms);
  const View four = View::of({"a", "b", "c", "d"}, three.id + 1, 40, Pace{6000, 1000});
  CHECK(a.on_members("b", one_view(four), t0 + 200ms).refused.empty());
  REQUIRE(a.latest_view() == four);
  // e joins too, and c's rival for that id has all five. c holds no figures of e yet, so it keeps the
  // pace of the view before, which the figures here no longer bear out; it brings no new pace, and
  // the larger rival is taken at once.
  a.on_hello(hello_of("e"), t0 + 300ms);
  const View five = View::of({"a", "b", "c", "d", "e"}, three.id + 1, 40, three.pace);
  CHECK(a.on_members("c", one_view(five), t0 + 300ms).refused.empty());
  CHECK(a.latest_view() == five);
}

TEST_CASE("one member's flood of views held back never evicts another member's", "[peer][membership][unit]") {
  const auto t0 = Clock::now();
  Membership a = federation_at_a(t0);
  const View before = a.latest_view();
  // c's proposal without b, which a still hears: held back until a's own timeout agrees.
  const View without_b = View::of({"a", "c"}, before.id + 1, 20);
  CHECK(refused_for(a.on_members("c", one_view(without_b), t0 + 100ms), RejectCause::kUnjustifiedView));
  // h floods views without c (which a hears too) under that id and the forty after it, six per id: each
  // is held back and counted once.
  std::size_t counted = 0;
  for (std::uint64_t id = before.id + 1; id <= before.id + 41; ++id)
    for (std::uint64_t r = 0; r < 6; ++r)
      counted += a.on_members("h", one_view(View::of({"a", "b"}, id, 20 + r)), t0 + 200ms).refused.size();
  CHECK(counted == 41 * 6);
  // b falls silent: a takes c's proposal, kept in c's own quota, rather than proposing a rival.
  a.heard_from("c", t0 + 1900ms);
  const auto change = a.tick(t0 + 1900ms);
  CHECK(change.died == std::vector<std::string>{"b"});
  CHECK(a.latest_view() == without_b);
}

TEST_CASE("a member that leaves and comes back again within the interval is held out of views until it has passed",
          "[peer][membership][unit]") {
  const auto t0 = Clock::now();
  auto a_config = config("a");
  a_config.hearsay_view_interval = 10s;
  Membership a(a_config, t0);
  a.on_hello(hello_of("b"), t0);
  a.on_hello(hello_of("c"), t0);
  a.tick(t0);
  a.note_own_round(1);
  const std::vector<std::string> all{"a", "b", "c"};
  REQUIRE(a.latest_view().members == all);
  auto tick_at = [&](Clock::time_point t) {
    a.heard_from("b", t);
    a.heard_from("c", t);
    return a.tick(t);
  };
  // b leaves and comes back (a new process): the first return is taken at once.
  a.on_leave("b", LeaveInfo{1});
  tick_at(t0 + 100ms);
  REQUIRE(a.latest_view().members == std::vector<std::string>{"a", "c"});
  CHECK(a.on_hello(hello_of("b", 2), t0 + 200ms).refused.empty());
  tick_at(t0 + 200ms);
  CHECK(a.latest_view().members == all);
  // It leaves and comes back again at once: alive, counted, and out of the views for 10 s from its
  // last return; a peer's view that takes it back meanwhile is held back (the return was counted).
  a.on_leave("b", LeaveInfo{2});
  tick_at(t0 + 300ms);
  const View out = a.latest_view();
  REQUIRE(out.members == std::vector<std::string>{"a", "c"});
  CHECK(refused_for(a.on_hello(hello_of("b", 3), t0 + 400ms), RejectCause::kIncarnation));
  CHECK(a.is_alive("b"));
  const View early = View::of(all, out.id + 1, out.effective_round + 5);
  CHECK(a.on_members("c", one_view(early), t0 + 500ms).refused.empty());
  for (auto t = t0 + 600ms; t < t0 + 10200ms; t += 900ms) {
    CHECK_FALSE(tick_at(t).views);
    CHECK(a.latest_view() == out);
  }
  // Once 10 s have passed since its last return, the peer's view is taken.
  CHECK(tick_at(t0 + 10300ms).views);
  CHECK(a.latest_view() == early);
}
