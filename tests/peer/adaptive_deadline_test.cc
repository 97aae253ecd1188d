#include <catch2/catch.hpp>

#include "error/error.h"
#include "peer/adaptive_deadline.h"

using namespace meridian::peer;
using namespace std::chrono_literals;

namespace {

AdaptiveDeadlineRule rule() {
  AdaptiveDeadlineRule r;
  r.floor = 1s;
  r.cap = 100s;
  r.initial = 30s;
  r.factor = 3;
  r.k = 8;
  r.tail = 2;
  r.window = 10;
  r.min_samples = 4;
  return r;
}

}  // namespace

TEST_CASE("an adaptive deadline keeps its initial value until enough samples are in", "[peer][deadline][unit]") {
  AdaptiveDeadline d(rule());
  CHECK(d.deadline() == 30s);
  for (int i = 0; i < 3; ++i) d.observe(2s);
  CHECK(d.deadline() == 30s);
  CHECK(describe_basis(d.basis(), d.rule(), "mixes") == "initial: 3 of 4 mixes measured");
  d.observe(2s);
  // 3 × median 2 s + 8 × MAD 0, and at least 2 × the longest, 2 s.
  CHECK(d.deadline() == 6s);
  CHECK(d.basis().median == 2s);
  CHECK(d.basis().mad == 0s);
  CHECK(describe_basis(d.basis(), d.rule(), "mixes") == "from the last 4 mixes: median 2 s, MAD 0 s, longest 2 s");
}

TEST_CASE("an adaptive deadline is factor × median + k × MAD, at least tail × the longest sample",
          "[peer][deadline][unit]") {
  AdaptiveDeadline d(rule());
  // Median 2 s, deviations 1, 0, 0, 1, 1 s: MAD 1 s. 3 × 2 + 8 × 1 = 14 s; twice the longest is 6 s.
  for (auto s : {1s, 2s, 2s, 3s, 3s}) d.observe(s);
  CHECK(d.basis().median == 2s);
  CHECK(d.basis().mad == 1s);
  CHECK(d.deadline() == 14s);
  // A stall far out: median and MAD barely move, but twice the longest sample now rules.
  d.observe(20s);
  CHECK(d.deadline() == 40s);
}

TEST_CASE("an adaptive deadline stays within its floor and cap, and forgets samples past its window",
          "[peer][deadline][unit]") {
  AdaptiveDeadline d(rule());
  for (int i = 0; i < 10; ++i) d.observe(10ms);
  CHECK(d.deadline() == 1s);  // floor
  CHECK(describe_basis(d.basis(), d.rule(), "gaps").ends_with("; at the floor"));
  d.observe(80s);
  CHECK(d.deadline() == 100s);  // cap: 2 × 80 s
  for (int i = 0; i < 10; ++i) d.observe(10ms);
  CHECK(d.deadline() == 1s);  // the long sample left the window of 10
  CHECK(d.basis().samples == 10);
  d.observe(-5s);  // counted as 0
  CHECK(d.deadline() == 1s);
}

TEST_CASE("an adaptive deadline refuses a rule out of bounds", "[peer][deadline][unit]") {
  auto bad = rule();
  bad.initial = 200s;
  CHECK_THROWS_AS(AdaptiveDeadline(bad), meridian::error::InternalError);
  bad = rule();
  bad.factor = 0.5;
  CHECK_THROWS_AS(AdaptiveDeadline(bad), meridian::error::InternalError);
  bad = rule();
  bad.min_samples = 11;
  CHECK_THROWS_AS(AdaptiveDeadline(bad), meridian::error::InternalError);
}
