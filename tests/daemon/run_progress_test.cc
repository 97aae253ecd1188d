// How far a run is: rounds done of the total, the share done, and the time left at the recent pace.
#include <catch2/catch.hpp>

#include "daemon/status/run_progress.h"

using namespace meridian::daemon;
using std::chrono::seconds;

TEST_CASE("a run's progress shows the share done and the time left at the recent pace", "[daemon][progress][unit]") {
  RunPace pace(seconds(30));
  const auto t0 = RunPace::Clock::time_point{} + seconds(1000);
  auto p = pace.progress(5000);
  CHECK(p.done == 0);
  CHECK(p.percent == 0);
  CHECK_FALSE(p.eta_seconds);  // nothing measured yet: no made-up time
  CHECK(format_run_progress(p) == "0 of 5000 rounds (0.0%)");

  pace.note(0, t0);
  pace.note(100, t0 + seconds(10));  // 10 rounds a second
  p = pace.progress(5000);
  CHECK(p.done == 100);
  CHECK(p.percent == Approx(2.0));
  REQUIRE(p.eta_seconds);
  CHECK(*p.eta_seconds == Approx(490.0));
  CHECK(format_run_progress(p) == "100 of 5000 rounds (2.0%), about 8 min 10 s left");

  // The pace is the recent one: after a minute at 20 rounds a second, the slow start is forgotten.
  for (int s = 1; s <= 60; ++s) pace.note(100 + 20 * static_cast<std::uint64_t>(s), t0 + seconds(10 + s));
  p = pace.progress(5000);
  CHECK(p.done == 1300);
  REQUIRE(p.eta_seconds);
  CHECK(*p.eta_seconds == Approx(3700.0 / 20).epsilon(0.02));

  pace.note(5000, t0 + seconds(300));
  p = pace.progress(5000);
  CHECK(p.percent == Approx(100.0));
  CHECK(p.eta_seconds == 0.0);
  CHECK(format_run_progress(p) == "5000 of 5000 rounds (100.0%), done");
}

TEST_CASE("a run of no rounds is done, and a stalled one has no time left to show", "[daemon][progress][unit]") {
  RunPace pace;
  const auto t0 = RunPace::Clock::time_point{} + seconds(5);
  CHECK(pace.progress(0).percent == 100.0);
  pace.note(40, t0);
  pace.note(40, t0 + seconds(20));  // no round in 20 s: no pace to divide by
  const auto p = pace.progress(100);
  CHECK(p.done == 40);
  CHECK_FALSE(p.eta_seconds);
}
