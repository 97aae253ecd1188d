#include <catch2/catch.hpp>

#include "daemon/federation/run_plan.h"

using namespace meridian::daemon;

TEST_CASE("a run plan survives its encoding; anything else is refused", "[daemon][plan][unit]") {
  for (const RunPlan plan : {RunPlan{234, 0}, RunPlan{1, 18446744073709551615ull}, RunPlan{702, 710},
                             RunPlan{50, 710, 640}})
    CHECK(decode_plan(encode_plan(plan)) == plan);
  for (const std::string bad : {"", "plan", "plan steps=0 end=5", "plan steps=12", "plan steps=12 end=3 more",
                                "plan steps=12 end=3 start=4", "plan steps=12 end=0 start=0", "plan steps=12 end=3 start=",
                                "plan steps=-1 end=3", "steps=12 end=3", "plan steps=1x end=3"})
    CHECK_FALSE(decode_plan(bad));
}

TEST_CASE("peer plans keep the newest plan per site and ignore other control messages", "[daemon][plan][unit]") {
  PeerPlans plans;
  auto m = plan_message({100, 0});
  m.from = "a";
  CHECK(plans.note(m) == RunPlan{100, 0});
  m = plan_message({100, 140});
  m.from = "a";
  CHECK(plans.note(m) == RunPlan{100, 140});
  meridian::peer::Message other;
  other.kind = meridian::peer::MessageKind::kControl;
  other.from = "b";
  other.body = "plan steps=5 end=0";  // right body, not the plan tag
  CHECK_FALSE(plans.note(other));
  const auto seen = plans.snapshot();
  REQUIRE(seen.size() == 1);
  CHECK(seen.at("a") == RunPlan{100, 140});
}
