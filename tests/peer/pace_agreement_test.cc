// Paces over real transports: three ZeroMQ sites on loopback with an emulated WAN latency measure
// their round trips by heartbeats, share them with their step times, and all take the same pace in
// the same view at the same round; when the step times change enough, a new view announces the new
// pace at a later round, again the same at every site. Sites that meet before any step time is known
// get the measured pace from the round the view that gathered them announced (peer/membership.h).
#include <catch2/catch.hpp>

#include <algorithm>
#include <functional>
#include <memory>
#include <vector>

#include "peer/zmq/zmq_transport.h"
#include "tests/support/eventually.h"

using namespace meridian::peer;
using namespace std::chrono_literals;
using meridian::tests::eventually;

namespace {

ZmqTransportOptions site(const std::string& name, std::vector<std::string> bootstrap) {
  ZmqTransportOptions o;
  o.name = name;
  o.insecure = true;
  o.wan = parse_wan_spec("latency=30ms");
  o.bootstrap = std::move(bootstrap);
  o.heartbeat_interval = 50ms;
  o.heartbeat_timeout = 10s;  // far above any stall of a loaded machine: nobody is declared dead
  o.view_lead_rounds = 4;
  o.agree_pace = true;
  return o;
}

// Every site runs the newest view's round (so that a new pace may be proposed), then whether all
// hold the same newest view and it satisfies `wanted`.
bool agree_on(const std::vector<std::unique_ptr<ZmqTransport>>& sites, const std::function<bool(const View&)>& wanted) {
  for (const auto& s : sites) s->set_round(s->latest_view().effective_round);
  const View v = sites.front()->latest_view();
  return wanted(v) && std::all_of(sites.begin(), sites.end(), [&](const auto& s) { return s->latest_view() == v; });
}

// Sites a, b and c, b and c joining a.
std::vector<std::unique_ptr<ZmqTransport>> three_sites() {
  std::vector<std::unique_ptr<ZmqTransport>> sites;
  sites.push_back(std::make_unique<ZmqTransport>(site("a", {})));
  const std::string first = "a@" + sites.front()->endpoint();
  sites.push_back(std::make_unique<ZmqTransport>(site("b", {first})));
  sites.push_back(std::make_unique<ZmqTransport>(site("c", {first})));
  return sites;
}

}  // namespace

TEST_CASE("sites on an emulated WAN agree on one measured pace, and a changed one is announced ahead at every site",
          "[peer][pace][wan][cluster]") {
  const auto sites = three_sites();
  for (const auto& s : sites) s->set_step_time(10ms);

  View measured;
  REQUIRE(eventually([&] {
    return agree_on(sites, [&](const View& v) {
      measured = v;
      return v.size() == 3 && v.pace.measured();
    });
  }));
  // The round trip includes the emulated 30 ms each way; the step time is the largest reported.
  CHECK(measured.pace.rtt_us >= 60'000);
  CHECK(measured.pace.step_us == 10'000);
  for (const auto& s : sites) CHECK(s->view_for(measured.effective_round) == measured);

  // Every site's steps get five times faster: a round trip is five times as many steps, beyond the
  // margin, so the first member announces a new pace in a view with the same members.
  for (const auto& s : sites) s->set_step_time(2ms);
  View faster;
  REQUIRE(eventually([&] {
    return agree_on(sites, [&](const View& v) {
      faster = v;
      return v.id > measured.id && v.pace.step_us == 2'000;
    });
  }));
  CHECK(faster.members == measured.members);
  CHECK(faster.effective_round > measured.effective_round);
  // Every site switches at the announced round, from the same view.
  const View before = sites.front()->view_for(faster.effective_round - 1);
  CHECK(before.pace != faster.pace);
  for (const auto& s : sites) {
    CHECK(s->view_for(faster.effective_round - 1) == before);
    CHECK(s->view_for(faster.effective_round) == faster);
  }
}

TEST_CASE("sites on an emulated WAN that meet before measuring start from one round with the measured pace",
          "[peer][pace][wan][cluster]") {
  const auto sites = three_sites();
  // No step time yet (the daemons time theirs before training): the view that gathers the three
  // carries no pace, and every site, running no round, awaits the amendment.
  auto all_hold = [&](const std::function<bool(const View&)>& wanted) {
    const View v = sites.front()->latest_view();
    return wanted(v) && std::all_of(sites.begin(), sites.end(), [&](const auto& s) { return s->latest_view() == v; });
  };
  View gathered;
  REQUIRE(eventually([&] {
    return all_hold([&](const View& v) {
      gathered = v;
      return v.size() == 3;
    });
  }));
  REQUIRE_FALSE(gathered.pace.measured());
  REQUIRE(eventually(
      [&] { return std::all_of(sites.begin(), sites.end(), [](const auto& s) { return s->awaits_pace(); }); }));

  for (const auto& s : sites) s->set_step_time(10ms);
  View amended;
  REQUIRE(eventually([&] {
    return all_hold([&](const View& v) {
      amended = v;
      return v.pace.measured();
    });
  }));
  CHECK(amended.id == gathered.id + 1);
  CHECK(amended.members == gathered.members);
  CHECK(amended.effective_round == gathered.effective_round);
  CHECK(amended.pace.rtt_us >= 60'000);
  CHECK(amended.pace.step_us == 10'000);
  REQUIRE(eventually(
      [&] { return std::none_of(sites.begin(), sites.end(), [](const auto& s) { return s->awaits_pace(); }); }));
  for (const auto& s : sites) CHECK(s->view_for(gathered.effective_round) == amended);
}
