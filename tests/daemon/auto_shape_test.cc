// Shapes chosen from the network (daemon/algorithms/auto_shape.h) and the margin that makes the sites
// choose again (peer/pace.h): figures in, shape out.
#include <catch2/catch.hpp>

#include "daemon/algorithms/auto_shape.h"
#include "peer/pace.h"

using namespace meridian::daemon::algorithms;
using meridian::peer::Pace;
using meridian::peer::pace_moved;

namespace {
constexpr DtsShape kFallback{2, 16};
}  // namespace

TEST_CASE("a link crossing count per exchange: one direct, 2(n - 1) over the ring, none alone",
          "[daemon][auto_shape][unit]") {
  CHECK(exchange_crossings(4, true) == 1);
  CHECK(exchange_crossings(4, false) == 6);
  CHECK(exchange_crossings(2, false) == 2);
  CHECK(exchange_crossings(1, false) == 0);
  CHECK(exchange_crossings(0, true) == 0);
}

TEST_CASE("the steps that cover twice the crossing are rounded up, and none without a measured pace",
          "[daemon][auto_shape][unit]") {
  // rtt 100 ms: one crossing 50 ms, twice that 100 ms = 2.5 steps of 40 ms, so 3.
  CHECK(steps_to_cover(Pace{100'000, 40'000}, 1) == 3);
  CHECK(steps_to_cover(Pace{80'000, 40'000}, 1) == 2);  // exactly 2 steps
  CHECK(steps_to_cover(Pace{80'001, 40'000}, 1) == 3);
  CHECK(steps_to_cover(Pace{100'000, 40'000}, 6) == 15);
  CHECK(steps_to_cover(Pace{100'000, 0}, 1) == 0);
  CHECK(steps_to_cover(Pace{0, 40'000}, 1) == 0);
  // The largest figures the wire allows do not overflow.
  CHECK(steps_to_cover(Pace{meridian::peer::kMaxPaceMicros, 1}, 64) == 64 * meridian::peer::kMaxPaceMicros);
}

TEST_CASE("dts: D covers twice the crossing within [2, 8], and P = 8 D; the default while not measured",
          "[daemon][auto_shape][unit]") {
  // 800 ms one way, 40 ms steps, direct exchange: twice the crossing is 40 steps: clamped at D = 8.
  CHECK(choose_dts_shape(Pace{1'600'000, 40'000}, 1, kFallback) == DtsShape{8, 64});
  // 100 ms one way (rtt 200 ms), 40 ms steps: 5 steps.
  CHECK(choose_dts_shape(Pace{200'000, 40'000}, 1, kFallback) == DtsShape{5, 40});
  // Over a ring of 4 sites the same link makes 6 crossings in a row: 30 steps, clamped.
  CHECK(choose_dts_shape(Pace{200'000, 40'000}, 6, kFallback) == DtsShape{8, 64});
  // A fast link still keeps D = 2 (one step of slack for sites that drift apart).
  CHECK(choose_dts_shape(Pace{200, 40'000}, 1, kFallback) == DtsShape{2, 16});
  CHECK(choose_dts_shape(Pace{}, 1, DtsShape{3, 24}) == DtsShape{3, 24});
}

TEST_CASE("sgp: tau - 1 covers twice the one-way latency, at most 32; the default while not measured",
          "[daemon][auto_shape][unit]") {
  CHECK(choose_sgp_tau(Pace{200'000, 40'000}, 1) == 6);  // 5 steps, plus one
  CHECK(choose_sgp_tau(Pace{200, 40'000}, 1) == 2);
  CHECK(choose_sgp_tau(Pace{3'000'000, 1'000}, 1) == 32);
  CHECK(choose_sgp_tau(Pace{0, 40'000}, 1) == 1);
}

TEST_CASE("diloco: the overlap covers 1.5 times the exchange's crossing, within [1, H]; the default within H",
          "[daemon][auto_shape][unit]") {
  CHECK(choose_diloco_overlap(Pace{800'000, 40'000}, 1, 32, 2) == 15);  // 400 ms one way, 1.5 times: 15 steps
  CHECK(choose_diloco_overlap(Pace{800'000, 50'000}, 1, 32, 2) == 12);  // 600 ms in 50 ms steps
  CHECK(choose_diloco_overlap(Pace{800'000, 40'000}, 6, 32, 2) == 32);  // over the ring: clamped at H
  CHECK(choose_diloco_overlap(Pace{200, 40'000}, 1, 32, 2) == 1);
  CHECK(choose_diloco_overlap(Pace{200'000, 40'000}, 0, 32, 2) == 1);  // a site alone
  CHECK(choose_diloco_overlap(Pace{}, 1, 32, 2) == 2);
  CHECK(choose_diloco_overlap(Pace{}, 1, 1, 2) == 1);
}

TEST_CASE("the sites choose again when the crossing in steps grows by a third or halves, not for less",
          "[peer][pace][unit]") {
  const Pace agreed{100'000, 10'000};  // 10 steps per round trip
  CHECK_FALSE(pace_moved(agreed, agreed));
  CHECK_FALSE(pace_moved(agreed, Pace{133'000, 10'000}));  // +33%: a shape for 2x still covers 1.5x
  CHECK(pace_moved(agreed, Pace{134'000, 10'000}));
  CHECK(pace_moved(agreed, Pace{100'000, 7'400}));  // faster steps are a longer crossing in steps
  CHECK_FALSE(pace_moved(agreed, Pace{51'000, 10'000}));
  CHECK(pace_moved(agreed, Pace{49'000, 10'000}));
  // Tiny crossings: every shape is at its smallest, nothing to choose again.
  CHECK_FALSE(pace_moved(Pace{100, 10'000}, Pace{2'000, 10'000}));
  CHECK(pace_moved(Pace{100, 10'000}, Pace{3'000, 10'000}));
  // A first measurement always counts; a missing one never does.
  CHECK(pace_moved(Pace{}, Pace{100, 10'000}));
  CHECK_FALSE(pace_moved(agreed, Pace{0, 10'000}));
  CHECK_FALSE(pace_moved(Pace{}, Pace{}));
}

TEST_CASE("a pace reads as its figures in milliseconds, or says it is not measured", "[daemon][auto_shape][unit]") {
  CHECK(describe_pace(Pace{120'000, 40'500}) == "round trip 120.0 ms, step 40.5 ms");
  CHECK(describe_pace(Pace{}) == "not measured yet: the default shape");
}
