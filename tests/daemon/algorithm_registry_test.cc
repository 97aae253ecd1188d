#include <catch2/catch.hpp>

#include <set>
#include <string>
#include <string_view>

#include "daemon/algorithms/registry.h"
#include "daemon/site_config.h"

using namespace meridian::daemon;

namespace {

// A valid configuration running `algo`, with `change` applied, as typed settings.
template <typename Change>
SiteSettings settings_for(const std::string& algo, Change change) {
  SiteConfig c;
  c.name = "a";
  c.algo = algo;
  change(c);
  return settings_of(c);
}
SiteSettings settings_for(const std::string& algo) {
  return settings_for(algo, [](SiteConfig&) {});
}

}  // namespace

TEST_CASE("every algorithm name has one registered algorithm, and --algo accepts exactly those",
          "[daemon][config][unit]") {
  std::set<std::string_view> names;
  for (const auto* algorithm : algorithms::all_algorithms()) {
    const std::string_view name = algorithm->name();
    CHECK(algorithms::find_algorithm(name) == algorithm);
    CHECK(&algorithms::algorithm_for(name) == algorithm);
    CHECK(&settings_for(std::string(name)).algorithm() == algorithm);
    names.insert(name);
  }
  CHECK(algorithms::all_algorithms().size() == names.size());  // no name twice
  CHECK(algorithms::find_algorithm("fedavg") == nullptr);
  CHECK_THROWS_AS(algorithms::algorithm_for("fedavg"), meridian::error::InternalError);
  CHECK(algorithms::algorithm_names() == "allreduce, dts, sgp, dsync, local, diloco, diloco-gossip");
}

TEST_CASE("the options are parsed once into types", "[daemon][config][unit]") {
  const auto s = settings_for("dts", [](SiteConfig& c) {
    c.optimizer = "sgd";
    c.schedule = "step:2:0.5";
    c.compression = "topk:0.1";
    c.compensation = "off";
    c.exchange = "direct";
    c.grid = "2x3";
    c.wan = "latency=10ms";
    c.wan_partition_origin = "training";
    c.device = "cpu";
    c.metrics_address = "off";
    c.dataset = "idx";
  });
  CHECK(s.algorithm().name() == "dts");
  CHECK(s.optimizer == meridian::models::OptimizerKind::sgd);
  CHECK(s.schedule.kind == ScheduleSpec::Kind::kStep);
  CHECK(s.schedule.step_epochs == 2);
  CHECK(s.compression.encoding == meridian::gossip::Encoding::kTopK);
  CHECK(s.compression.fraction == 0.1);
  CHECK(s.compensation == meridian::gossip::DtsCompensation::kStale);
  CHECK(s.exchange == Exchange::kDirect);
  CHECK(s.grid == GridSpec{2, 3});
  CHECK(s.wan_partition_origin.kind == PartitionOrigin::Kind::kTraining);
  CHECK(s.device.kind == meridian::models::DeviceRequest::Kind::kCpu);
  CHECK_FALSE(s.metrics_address);
  CHECK(s.dataset == Dataset::kIdx);

  // Every problem at once, the algorithm's own among them.
  SiteConfig bad;
  bad.algo = "dts";
  bad.optimizer = "adam";
  bad.grid = "2by2";
  bad.tau = 0;
  const auto parsed = parse_site_settings(bad);
  CHECK_FALSE(parsed.settings);
  std::string all;
  for (const auto& p : parsed.problems) all += p + "\n";
  CHECK_THAT(all, Catch::Contains("--name: missing") && Catch::Contains("--grid: '2by2'") &&
                      Catch::Contains("--tau: 0 is below the minimum 1") &&
                      Catch::Contains("--optimizer: dts is its own optimizer"));
  CHECK_THROWS_AS(settings_of(bad), SiteConfigError);
}

TEST_CASE("each algorithm says what it sends and which buffers a site warms for it", "[daemon][config][unit]") {
  const std::size_t n = 1000;
  const auto& dts = algorithms::algorithm_for("dts");
  CHECK(dts.wire_limits(settings_for("dts")).max_model_multiple == 2);  // momentum: weights and buffer
  CHECK(dts.wire_limits(settings_for("dts", [](SiteConfig& c) { c.optimizer = "sgd"; })).max_model_multiple == 1);
  CHECK(dts.buffer_sizes(settings_for("dts"), n).channel_elements == 2 * n);
  CHECK(dts.buffer_sizes(settings_for("dts"), n).share_elements == n);
  CHECK(dts.buffer_sizes(settings_for("dts", [](SiteConfig& c) { c.exchange = "direct"; }), n).share_elements == 2 * n);

  const auto& allreduce = algorithms::algorithm_for("allreduce");
  CHECK_FALSE(allreduce.wire_limits(settings_for("allreduce")).pin_model_elements);
  for (const char* name : {"sgp", "dsync", "local"}) {
    INFO(name);
    const auto& a = *algorithms::find_algorithm(name);
    CHECK(a.wire_limits(settings_for(name)).pin_model_elements);
    CHECK(a.wire_limits(settings_for(name)).max_model_multiple == 1);
    CHECK(a.buffer_sizes(settings_for(name), n).channel_elements == n);
  }
  CHECK_FALSE(algorithms::algorithm_for("local").communicates());
  CHECK_FALSE(algorithms::algorithm_for("sgp").peers_wait_for_rejoin());
  CHECK(algorithms::algorithm_for("dsync").peers_wait_for_rejoin());
}

TEST_CASE("--grid reaches dsync as typed, and a knob only some algorithms read is refused for the rest",
          "[daemon][config][unit]") {
  CHECK(settings_for("dsync", [](SiteConfig& c) { c.grid = "1x4"; }).grid == GridSpec{1, 4});
  CHECK(settings_for("dsync").grid.is_auto());
  CHECK(describe_algorithm(settings_for("dsync", [](SiteConfig& c) { c.grid = "2x2"; })) == "dsync, grid 2x2, D = 0");

  SiteConfig c;
  c.name = "a";
  c.algo = "local";
  c.exchange = "direct";
  c.compression = "fp16";
  const auto problems = site_config_problems(c);
  std::string all;
  for (const auto& p : problems) all += p + "\n";
  CHECK_THAT(all, Catch::Contains("--exchange: applies to dts and diloco only (this site runs local)"));
  CHECK_THAT(all, Catch::Contains("--compression: fp16 applies to dts, sgp, diloco and diloco-gossip only"));
}
