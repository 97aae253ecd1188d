// When a view comes into force (peer/membership.h): only once every other member holds it, so that a
// site that defers a proposal on its own evidence never strands the proposer in a view it runs alone,
// and a view one member never takes (its roster lacks a joiner) never comes into force anywhere.
#include <catch2/catch.hpp>

#include "peer/membership.h"
#include "tests/peer/membership_config.h"

using namespace meridian::peer;
using namespace std::chrono_literals;
using Clock = Membership::Clock;

namespace {

HelloInfo hello_of(const std::string& name) { return {name, "tcp://127.0.0.1:1/" + name, "", 1, 0, {}, {}}; }

// Each of `sites` takes the others' member lists, as the gossip delivers them.
void exchange(std::initializer_list<Membership*> sites, Clock::time_point now) {
  for (auto* to : sites)
    for (auto* from : sites)
      if (to != from) to->on_members(from->self(), from->snapshot(), now);
}

// The view in force at `round` at `m`: what its rounds run in.
View in_force_at(const Membership& m, std::uint64_t round) {
  const View* best = &m.views_in_force().front();
  for (const auto& v : m.views_in_force())
    if (v.effective_round <= round) best = &v;
  return *best;
}

bool has_refusal(const MembershipChange& change, RejectCause cause) {
  for (const auto& r : change.refused)
    if (r.cause == cause) return true;
  return false;
}

}  // namespace

TEST_CASE("a view dropping a dead member is in force at its proposer once the other members hold it, not before",
          "[peer][membership][unit]") {
  const auto t0 = Clock::now();
  Membership a(meridian::peer::testing::membership_config("a"), t0);
  Membership b(meridian::peer::testing::membership_config("b"), t0);
  for (auto* s : {&a, &b}) {
    s->on_hello(hello_of(s == &a ? "b" : "a"), t0);
    s->on_hello(hello_of("c"), t0);
    s->tick(t0);
  }
  exchange({&a, &b}, t0);
  const View all = a.latest_view();
  REQUIRE(all.members == std::vector<std::string>{"a", "b", "c"});
  REQUIRE(b.latest_view() == all);
  // Held, not in force, until c's own list holds it too.
  CHECK(a.views_in_force().back().id == 0);
  CHECK(a.pending_view_note() == "view 1 (a,b,c) is not in force here until c holds it too");
  MemberListInfo from_c;
  from_c.views = {all};
  for (auto* s : {&a, &b}) CHECK(s->on_members("c", from_c, t0).views);
  REQUIRE(a.views_in_force().back() == all);
  REQUIRE(b.views_in_force().back() == all);
  CHECK_FALSE(a.pending_view_note());

  // c crashes. a heard it last at t0, b at t0 + 600 ms (its heartbeats reached b later, or b's own
  // timer runs late): a's timeout fires first and a proposes the view without c.
  b.heard_from("c", t0 + 600ms);
  for (auto* s : {&a, &b}) s->heard_from(s == &a ? "b" : "a", t0 + 1000ms);
  const auto proposed = a.tick(t0 + 1100ms);
  REQUIRE(proposed.died == std::vector<std::string>{"c"});
  const View without_c = a.latest_view();
  REQUIRE(without_c.members == std::vector<std::string>{"a", "b"});
  // b still hears c: it holds the proposal back; a holds it but does not run it.
  CHECK(has_refusal(b.on_members("a", a.snapshot(), t0 + 1100ms), RejectCause::kUnjustifiedView));
  a.on_members("b", b.snapshot(), t0 + 1100ms);
  CHECK(a.views_in_force().back() == all);
  CHECK(in_force_at(a, without_c.effective_round + 100) == all);
  CHECK(a.pending_view_note() == "view 2 (a,b) is not in force here until b holds it too");
  // Its rounds from the view's first round on await it; the rounds before do not.
  CHECK(a.view_awaited(without_c.effective_round) == without_c);
  CHECK_FALSE(a.view_awaited(without_c.effective_round - 1));
  CHECK(b.views_in_force().back() == all);

  // b's own timeout agrees: it takes a's proposal, which a already holds, so it is in force at b at
  // once, and at a as soon as b's list arrives. Both run it from the same round.
  b.heard_from("a", t0 + 1600ms);
  const auto taken = b.tick(t0 + 1700ms);
  CHECK(taken.died == std::vector<std::string>{"c"});
  CHECK(taken.views);
  CHECK(b.latest_view() == without_c);
  CHECK(b.views_in_force().back() == without_c);
  const auto confirmed = a.on_members("b", b.snapshot(), t0 + 1700ms);
  CHECK(confirmed.views);
  CHECK(a.views_in_force().back() == without_c);
  CHECK(in_force_at(a, without_c.effective_round) == without_c);
  CHECK(in_force_at(a, without_c.effective_round - 1) == all);
  CHECK_FALSE(a.pending_view_note());
  CHECK_FALSE(a.view_awaited(without_c.effective_round));
}

TEST_CASE("a joiner's view is awaited by the rounds from its first round until every member holds it",
          "[peer][membership][unit]") {
  const auto t0 = Clock::now();
  Membership a(meridian::peer::testing::membership_config("a"), t0);
  Membership b(meridian::peer::testing::membership_config("b"), t0);
  Membership c(meridian::peer::testing::membership_config("c"), t0);
  a.on_hello(hello_of("b"), t0);
  b.on_hello(hello_of("a"), t0);
  a.tick(t0);
  exchange({&a, &b}, t0);
  exchange({&a, &b}, t0);
  const View pair = a.views_in_force().back();
  REQUIRE(pair.members == std::vector<std::string>{"a", "b"});
  REQUIRE(b.views_in_force().back() == pair);
  for (auto* s : {&a, &b}) s->note_own_round(40);

  // c greets a; a proposes the view with c, from a round ahead.
  a.on_hello(hello_of("c"), t0 + 100ms);
  c.on_hello(hello_of("a"), t0 + 100ms);
  a.tick(t0 + 100ms);
  const View three = a.latest_view();
  REQUIRE(three.members == std::vector<std::string>{"a", "b", "c"});
  REQUIRE(three.effective_round > 40);
  CHECK(a.views_in_force().back() == pair);
  CHECK(a.view_awaited(three.effective_round) == three);
  CHECK(a.view_awaited(three.effective_round + 1000) == three);
  CHECK_FALSE(a.view_awaited(three.effective_round - 1));

  // The first hop: b and c hold it. b's rounds await it too (c does not hold it in b's eyes yet).
  for (auto* s : {&b, &c}) s->on_members("a", a.snapshot(), t0 + 110ms);
  CHECK(b.latest_view() == three);
  CHECK(b.view_awaited(three.effective_round) == three);
  // c greets b, which it has heard of: only a member heard from confirms a view.
  b.on_hello(hello_of("c"), t0 + 115ms);
  c.on_hello(hello_of("b"), t0 + 115ms);
  // The second hop: each hears that the others hold it; then no round awaits it and it runs from its
  // first round everywhere, the joiner's first.
  exchange({&a, &b, &c}, t0 + 120ms);
  for (auto* s : {&a, &b, &c}) {
    CHECK(s->views_in_force().back() == three);
    CHECK_FALSE(s->view_awaited(three.effective_round));
    CHECK(in_force_at(*s, three.effective_round) == three);
    CHECK(in_force_at(*s, three.effective_round - 1) == pair);
  }
}

TEST_CASE("a view one member never takes never comes into force, and the note names that member",
          "[peer][membership][unit]") {
  const auto t0 = Clock::now();
  // alpha's roster lacks gamma; beta's lists all three.
  auto alpha_config = meridian::peer::testing::membership_config("alpha");
  alpha_config.admissible = [](const std::string& name) { return name == "alpha" || name == "beta"; };
  Membership alpha(alpha_config, t0);
  Membership beta(meridian::peer::testing::membership_config("beta"), t0);
  alpha.on_hello(hello_of("beta"), t0);
  beta.on_hello(hello_of("alpha"), t0);
  beta.tick(t0);
  exchange({&alpha, &beta}, t0);
  alpha.tick(t0);
  exchange({&alpha, &beta}, t0);
  const View pair = beta.views_in_force().back();
  REQUIRE(pair.members == std::vector<std::string>{"alpha", "beta"});
  REQUIRE(alpha.views_in_force().back() == pair);

  // gamma greets beta only (alpha's handshake refuses its key), and confirms whatever beta proposes.
  beta.on_hello(hello_of("gamma"), t0 + 100ms);
  beta.tick(t0 + 100ms);
  const View three = beta.latest_view();
  REQUIRE(three.members == std::vector<std::string>{"alpha", "beta", "gamma"});
  MemberListInfo from_gamma;
  from_gamma.views = {three};
  for (auto t = t0 + 100ms; t < t0 + 900ms; t += 100ms) {
    CHECK(has_refusal(alpha.on_members("beta", beta.snapshot(), t), RejectCause::kInventedMember));
    beta.on_members("alpha", alpha.snapshot(), t);
    beta.on_members("gamma", from_gamma, t);
    for (const auto* name : {"alpha", "gamma"}) beta.heard_from(name, t);
    alpha.heard_from("beta", t);
    beta.tick(t);
    alpha.tick(t);
  }
  CHECK(beta.latest_view() == three);
  CHECK(beta.views_in_force().back() == pair);
  CHECK(in_force_at(beta, three.effective_round + 100) == pair);
  // beta's rounds await it for ever (the daemon waits for a bounded time: daemon/federation/round_view.h).
  CHECK(beta.view_awaited(three.effective_round + 100) == three);
  CHECK(beta.pending_view_note() == "view " + std::to_string(three.id) +
                                        " (alpha,beta,gamma) is not in force here until alpha holds it too");
  CHECK(alpha.views_in_force().back() == pair);
}

TEST_CASE("a rostered site that never greeted this one cannot bring a view listing it into force by holding it",
          "[peer][membership][unit]") {
  const auto t0 = Clock::now();
  Membership a(meridian::peer::testing::membership_config("a"), t0);
  Membership b(meridian::peer::testing::membership_config("b"), t0);
  a.on_hello(hello_of("b"), t0);
  b.on_hello(hello_of("a"), t0);
  a.tick(t0);
  exchange({&a, &b}, t0);
  exchange({&a, &b}, t0);
  const View pair = a.views_in_force().back();
  REQUIRE(pair.members == std::vector<std::string>{"a", "b"});
  // h, rostered but never a member (it sent no hello), proposes a view with itself and says it holds it.
  const View with_h = View::of({"a", "b", "h"}, pair.id + 1, 30);
  MemberListInfo from_h;
  from_h.views = {with_h};
  for (auto* s : {&a, &b}) s->on_members("h", from_h, t0 + 10ms);
  exchange({&a, &b}, t0 + 20ms);
  for (auto* s : {&a, &b}) {
    CHECK(s->latest_view() == with_h);
    CHECK(s->views_in_force().back() == pair);
    CHECK(s->pending_view_note() ==
          "view " + std::to_string(with_h.id) + " (a,b,h) is not in force here until h holds it too");
  }
}
