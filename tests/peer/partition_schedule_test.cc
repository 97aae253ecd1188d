#include <catch2/catch.hpp>

#include "error/error.h"
#include "peer/partition_schedule.h"

using namespace meridian::peer;
using namespace std::chrono_literals;

TEST_CASE("a partition cuts the groups of a window from each other while it lasts", "[peer][partition][unit]") {
  const auto p = parse_partition_schedule(" s0,s1 | s2,s3 @ 20s+10s ; a|b @ 500ms+1.5s");
  REQUIRE(p.windows().size() == 2);
  CHECK(p.windows()[0].groups == std::vector<std::vector<std::string>>{{"s0", "s1"}, {"s2", "s3"}});
  CHECK(p.windows()[0].start == 20s);
  CHECK(p.windows()[0].length == 10s);
  CHECK(p.windows()[1].start == 500ms);
  CHECK(p.windows()[1].length == 1500ms);

  CHECK_FALSE(p.cuts("s0", "s2", 19999999us));
  CHECK(p.cuts("s0", "s2", 20s));
  CHECK(p.cuts("s3", "s1", 29s));
  CHECK_FALSE(p.cuts("s0", "s2", 30s));  // healed
  CHECK_FALSE(p.cuts("s0", "s1", 25s));  // same side
  CHECK_FALSE(p.cuts("s0", "x", 25s));   // x is in no group
  CHECK(p.cuts("a", "b", 1s));
  CHECK_FALSE(p.cuts("a", "b", 2s));
  CHECK(parse_partition_schedule("").empty());
  CHECK(parse_partition_schedule("  ").empty());
}

TEST_CASE("a repeating window flaps a link: down for its length out of every period", "[peer][partition][unit]") {
  const auto p = parse_partition_schedule("s0|s1@10s+2s every 6s");
  REQUIRE(p.windows().size() == 1);
  CHECK(p.windows()[0].period == 6s);
  CHECK_FALSE(p.cuts("s0", "s1", 9s));
  for (int cycle = 0; cycle < 4; ++cycle) {
    const auto at = 10s + cycle * 6s;
    INFO("cycle " << cycle);
    CHECK(p.cuts("s0", "s1", at));
    CHECK(p.cuts("s1", "s0", at + 1999ms));
    CHECK_FALSE(p.cuts("s0", "s1", at + 2s));  // up again
    CHECK_FALSE(p.cuts("s0", "s1", at + 5999ms));
  }
  CHECK_FALSE(p.cuts("s0", "s2", 10s));  // only that link
}

TEST_CASE("a '*' group cuts one site off from every other for a duration", "[peer][partition][unit]") {
  const auto p = parse_partition_schedule("s3|*@20s+120s");
  CHECK(p.windows()[0].groups == std::vector<std::vector<std::string>>{{"s3"}, {"*"}});
  for (const char* other : {"s0", "s1", "s2", "a-site-named-nowhere"}) {
    INFO(other);
    CHECK_FALSE(p.cuts("s3", other, 19s));
    CHECK(p.cuts("s3", other, 20s));
    CHECK(p.cuts(other, "s3", 139s));
    CHECK_FALSE(p.cuts("s3", other, 140s));
  }
  CHECK_FALSE(p.cuts("s0", "s1", 30s));  // the others still reach each other
  const auto flapping = parse_partition_schedule("s2|*@0s+1s every 3s");
  CHECK(flapping.cuts("s2", "s0", 3500ms));
  CHECK_FALSE(flapping.cuts("s2", "s0", 4500ms));
}

TEST_CASE("a malformed partition schedule is refused with a message naming the problem", "[peer][partition][unit]") {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"s0,s1", "GROUPS@START+LENGTH"},       {"s0|s1@20s", "START+LENGTH"},
      {"s0,s1@1s+1s", "at least two groups"}, {"s0|s0@1s+1s", "in two groups"},
      {"s0|,s1@1s+1s", "empty site name"},    {"s0|s1@1+1s", "needs a unit"},
      {"s0|s1@-1s+1s", "not a duration"},     {"s0|s1@1s+0s", "length must be above 0"},
      {"s0|s1@1s+2s every 2s", "period must exceed its length"},
      {"s0|s1@1s+2s every 0s", "period must exceed its length"},
      {"s0|s1@1s+2s every 5", "needs a unit"},
      {"s0|*|*@1s+1s", "one '*' per window"},
      {"s0|s1,*@1s+1s", "'*' is a group of its own"},
  };
  for (const auto& [text, problem] : bad) {
    INFO(text);
    try {
      (void)parse_partition_schedule(text);
      FAIL("accepted");
    } catch (const meridian::error::UserError& e) {
      const std::string what = e.what();
      CHECK(what.find(problem) != std::string::npos);
      CHECK(what.find("e.g. s0,s1|s2,s3@20s+10s") != std::string::npos);
    }
  }
}
