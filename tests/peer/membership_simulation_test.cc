#include <catch2/catch.hpp>

#include <algorithm>

#include <spdlog/spdlog.h>

#include "peer/membership_simulation.h"

using namespace meridian::peer;
using namespace std::chrono_literals;

namespace {

// Every simulated site logs each join and death; the test's own output stays readable.
class QuietLog {
 public:
  QuietLog() : level_(spdlog::get_level()) { spdlog::set_level(spdlog::level::warn); }
  ~QuietLog() { spdlog::set_level(level_); }
  QuietLog(const QuietLog&) = delete;
  QuietLog& operator=(const QuietLog&) = delete;

 private:
  spdlog::level::level_enum level_;
};

MembershipSimulationOptions small_federation(double loss) {
  MembershipSimulationOptions o;
  o.sites = 12;
  o.seed = 7;
  o.loss = loss;
  o.join_limit = 60s;
  o.settle = 2s;
  o.steady = 2s;
  o.crash_fraction = 0.01;  // of 12 sites: one
  o.after_crash = 15s;
  return o;
}

// What the protocol guarantees after a crash: every live site holds in force the same view, of exactly
// the live sites, and each declared each crashed site dead by its own timeout.
void check_converged_without_crashed(const MembershipSimulationOptions& o, const MembershipSimulationReport& r) {
  REQUIRE(r.join_time.has_value());
  CHECK(r.join_view_id >= 1);
  REQUIRE(r.crashed.size() == 1);
  REQUIRE(r.final_views.size() == o.sites - 1);
  for (const auto& v : r.final_views) {
    CHECK(v == r.final_views.front());
    CHECK(v.size() == o.sites - 1);
    CHECK_FALSE(v.rank_of(r.crashed.front()).has_value());
  }
  REQUIRE(r.new_view_everywhere.has_value());
  CHECK(r.crash_view_id == r.final_views.front().id);
  CHECK(r.crash_view_id > r.join_view_id);
  CHECK(r.detections_missing == 0);
  REQUIRE(r.detect_first.has_value());
  REQUIRE(r.detect_last.has_value());
  // A site declares a member dead at its first tick after the timeout has passed since it last heard
  // from it: at most an interval before the crash (its last heartbeat), at most a one-way trip after it
  // (a message still on its way).
  std::chrono::microseconds longest_trip{0};
  for (std::size_t from = 0; from < o.wan.regions(); ++from)
    for (std::size_t to = 0; to < o.wan.regions(); ++to)
      longest_trip = std::max(longest_trip, o.wan.link(from, to).latency + o.wan.link(from, to).jitter);
  CHECK(*r.detect_last <= o.heartbeat_timeout + o.heartbeat_interval + longest_trip);
  CHECK(*r.detect_first >= o.heartbeat_timeout - o.heartbeat_interval);
}

}  // namespace

TEST_CASE("membership simulation: 12 sites join at once, one crashes, every live site converges on one view",
          "[peer][unit]") {
  const QuietLog quiet;
  const auto o = small_federation(0);
  const auto r = simulate_membership(o);
  check_converged_without_crashed(o, r);
  // Without loss nothing is late: no live site is ever declared dead, so nobody refutes.
  CHECK(r.false_deaths == 0);
  CHECK(r.refutations == 0);
  // Every site sends a heartbeat to each of the 11 others every interval, and more besides.
  CHECK(r.messages_per_s_mean >= 11.0 / 0.5);
  CHECK(r.heartbeat_bytes_per_s_mean > 0);
  CHECK(r.bytes_per_s_mean >= r.heartbeat_bytes_per_s_mean + r.members_bytes_per_s_mean - 1e-6);
  CHECK(r.largest_member_list_bytes > 12 * 20);  // twelve records, each with its name and address
}

TEST_CASE("membership simulation: with 1% of messages retransmitted, the crash is still the only death",
          "[peer][unit]") {
  const QuietLog quiet;
  const auto o = small_federation(0.01);
  const auto r = simulate_membership(o);
  check_converged_without_crashed(o, r);
  // A retransmission delays a heartbeat by hundreds of milliseconds, far less than the timeout.
  CHECK(r.false_deaths == 0);
}

TEST_CASE("membership simulation: refuses what it cannot simulate", "[peer][unit]") {
  MembershipSimulationOptions o;
  o.sites = 1;
  CHECK_THROWS_WITH(simulate_membership(o), Catch::Contains("2 sites"));
  o.sites = 4;
  o.bootstraps = 5;
  CHECK_THROWS_WITH(simulate_membership(o), Catch::Contains("bootstraps"));
  o.bootstraps = 1;
  o.loss = 1;
  CHECK_THROWS_WITH(simulate_membership(o), Catch::Contains("loss"));
}

TEST_CASE("steady membership traffic grows with the sites: a heartbeat to each and the whole table",
          "[peer][unit]") {
  const MembershipSimulationOptions o;
  const auto small = steady_membership_traffic(100, 1, o);
  const auto large = steady_membership_traffic(1000, 1, o);
  CHECK(small.heartbeat_bytes > 0);
  CHECK(large.member_list_bytes > 9 * small.member_list_bytes);
  CHECK(large.bytes_per_s > 9 * small.bytes_per_s);
  CHECK(steady_membership_traffic(100, 8, o).member_list_bytes > small.member_list_bytes);
}
