// Membership::expel: what taking a member out of the roster does to the membership state machine.
#include <catch2/catch.hpp>

#include "peer/membership.h"
#include "tests/peer/membership_config.h"

using namespace meridian::peer;
using namespace std::chrono_literals;
using Clock = Membership::Clock;

namespace {

MembershipConfig config(const std::string& self) { return meridian::peer::testing::membership_config(self); }

HelloInfo hello_of(const std::string& name, std::uint64_t incarnation = 1) {
  return {name, "tcp://127.0.0.1:1/" + name, "", incarnation, 0, {}, {}};
}

}  // namespace

TEST_CASE("a member taken out of the roster is expelled: left at once and out of the next view, here only",
          "[peer][membership][roster][unit]") {
  const auto t0 = Clock::now();
  bool c_admitted = true;
  auto ca = config("a");
  ca.admissible = [&](const std::string& n) { return n != "c" || c_admitted; };
  Membership a(ca, t0);
  Membership b(config("b"), t0);
  a.on_hello(hello_of("b"), t0);
  a.on_hello(hello_of("c"), t0);
  a.tick(t0);
  b.on_members("a", a.snapshot(), t0);
  b.on_hello(hello_of("c"), t0);
  REQUIRE(a.latest_view().members == std::vector<std::string>{"a", "b", "c"});
  REQUIRE(b.is_alive("c"));

  c_admitted = false;
  const auto change = a.expel("c");
  CHECK(change.left == std::vector<std::string>{"c"});
  CHECK(change.records);
  CHECK_FALSE(a.is_alive("c"));
  CHECK(a.tick(t0).views);
  CHECK(a.latest_view().members == std::vector<std::string>{"a", "b"});
  // Leaving the roster is each site's own decision: b, whose roster still lists c, refuses a's record,
  // and holds back a's view without c, which b still hears.
  const auto gossiped = b.on_members("a", a.snapshot(), t0);
  REQUIRE(gossiped.refused.size() == 2);
  CHECK(gossiped.refused[0].cause == RejectCause::kUnvouched);
  CHECK(gossiped.refused[1].cause == RejectCause::kUnjustifiedView);
  CHECK(b.is_alive("c"));
  CHECK(b.latest_view().rank_of("c"));
  // c's own hello, even with a higher incarnation, no longer gets it back in at a.
  CHECK_FALSE(a.on_hello(hello_of("c", 2), t0).any());
  CHECK_FALSE(a.is_alive("c"));
  // Nothing to expel twice, nor this site itself, nor a stranger.
  CHECK_FALSE(a.expel("c").any());
  CHECK_FALSE(a.expel("a").any());
  CHECK_FALSE(a.expel("nobody").any());
}
