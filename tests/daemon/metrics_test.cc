#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <thread>

#include "daemon/metrics/daemon_metrics.h"
#include "daemon/metrics/metrics_registry.h"
#include "daemon/metrics/metrics_server.h"
#include "tests/daemon/http_get.h"
#include "tests/support/temp_dir.h"

using namespace meridian::daemon;
using Catch::Matchers::Contains;
using meridian::tests::http_get;

namespace {

bool have_promtool() { return std::system("command -v promtool >/dev/null 2>&1") == 0; }

}  // namespace

TEST_CASE("metric values and labels are rendered in the exposition format", "[daemon][metrics][unit]") {
  CHECK(format_metric_value(0) == "0");
  CHECK(format_metric_value(1.5) == "1.5");
  CHECK(format_metric_value(1e-9) == "1e-09");
  CHECK(format_metric_value(std::numeric_limits<double>::infinity()) == "+Inf");
  CHECK(format_metric_value(-std::numeric_limits<double>::infinity()) == "-Inf");
  CHECK(format_metric_value(std::nan("")) == "NaN");

  MetricsRegistry registry;
  auto& bytes = registry.counter_family("x_bytes_total", "Bytes.\nSecond line \\ here", {"peer"});
  bytes.with({"oregon"}).inc(10);
  bytes.with({"oregon"}).inc(5);
  bytes.with({"we\"ird\\name\n"}).inc();
  registry.gauge("x_step", "Step.").set(42);
  const auto text = registry.render();
  CHECK(text ==
        "# HELP x_bytes_total Bytes.\\nSecond line \\\\ here\n"
        "# TYPE x_bytes_total counter\n"
        "x_bytes_total{peer=\"oregon\"} 15\n"
        "x_bytes_total{peer=\"we\\\"ird\\\\name\\n\"} 1\n"
        "# HELP x_step Step.\n"
        "# TYPE x_step gauge\n"
        "x_step 42\n");

  bytes.remove({"oregon"});
  CHECK(bytes.size() == 1);
  CHECK_THROWS_WITH(bytes.with({}), Contains("takes 1 label values, got 0"));
  CHECK_THROWS_WITH(registry.gauge("x_step", "again"), Contains("registered twice"));
  CHECK_THROWS_WITH(registry.gauge("1bad", "x"), Contains("not a valid Prometheus metric name"));
  CHECK_THROWS_WITH(registry.gauge_family("ok", "x", {"bad-label"}), Contains("not a valid label name"));
}

TEST_CASE("counters and gauges are safe to update from several threads", "[daemon][metrics][unit]") {
  MetricsRegistry registry;
  auto& family = registry.counter_family("events_total", "Events.", {"peer"});
  auto& gauge = registry.gauge("level", "Level.");
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 10000; ++i) {
        family.with({std::string("p") + std::to_string(i % 3)}).inc();
        gauge.add(t % 2 == 0 ? 1 : -1);
        if (i % 1000 == 0) (void)registry.render();
      }
    });
  }
  for (auto& t : threads) t.join();
  CHECK(family.with({"p0"}).value() + family.with({"p1"}).value() + family.with({"p2"}).value() == 40000);
  CHECK(gauge.value() == 0);
}

TEST_CASE("checkpoint age counts from the last checkpoint", "[daemon][metrics][unit]") {
  DaemonMetrics metrics("oregon", "sgp");
  metrics.checkpoint_written(DaemonMetrics::Clock::now() - std::chrono::hours(1));
  const auto text = metrics.registry().render();
  const auto at = text.find("\nmeridian_checkpoint_age_seconds ");
  REQUIRE(at != std::string::npos);
  const double age = std::stod(text.substr(at + 33));
  CHECK(age >= 3600);
  CHECK(metrics.checkpoints_written.value() == 1);
}

namespace {

// Sets one value on every kind of metric a daemon exports, labelled families included.
void populate(DaemonMetrics& metrics) {
  metrics.step.set(1200);
  metrics.epoch.set(3);
  metrics.total_steps.set(5000);
  metrics.progress_ratio.set(0.24);
  metrics.eta_seconds.set(380);
  metrics.train_loss.set(0.4123);
  metrics.test_accuracy.set(0.862);
  metrics.samples_per_second.set(5400.5);
  metrics.push_sum_weight.set(0.97);
  metrics.staleness_steps.set(1);
  metrics.peers_alive.set(4);
  metrics.rounds_abandoned.inc();
  metrics.peer_rtt_seconds.with({"tokyo"}).set(0.2);
  metrics.peer_rtt_seconds.with({"london"}).set(0.135);
  metrics.peer_sent_bytes.with({"tokyo"}).inc(1 << 20);
  metrics.peer_received_bytes.with({"tokyo"}).inc(1 << 19);
  metrics.rejected_messages.with({"non_finite"}).inc(2);
  metrics.rejected_messages.with({"wrong_fingerprint"}).inc();
  metrics.checkpoint_failures.inc();
  metrics.checkpoint_written();
}

}  // namespace

TEST_CASE("/metrics over HTTP serves every metric with its value, and nothing elsewhere",
          "[daemon][metrics][cluster]") {
  DaemonMetrics metrics("oregon", "sgp");
  populate(metrics);
  MetricsServer server(metrics.registry(), "127.0.0.1:0");
  REQUIRE(server.port() > 0);
  CHECK(server.url() == std::string("http://127.0.0.1:") + std::to_string(server.port()) + "/metrics");
  const auto response = http_get(server.port(), "/metrics");
  REQUIRE_THAT(response, Contains("200 OK") && Contains("text/plain; version=0.0.4"));
  const auto body = meridian::tests::http_body(response);
  for (const char* name :
       {"meridian_step 1200", "meridian_epoch 3", "meridian_total_steps 5000", "meridian_progress_ratio 0.24",
        "meridian_eta_seconds 380", "meridian_train_loss 0.4123", "meridian_test_accuracy 0.862",
        "meridian_samples_per_second 5400.5", "meridian_push_sum_weight 0.97", "meridian_staleness_steps 1",
        "meridian_peers_alive 4", "meridian_rounds_abandoned_total 1", "meridian_peer_rtt_seconds{peer=\"tokyo\"} 0.2",
        "meridian_peer_sent_bytes_total{peer=\"tokyo\"} 1048576",
        "meridian_peer_received_bytes_total{peer=\"tokyo\"} 524288",
        "meridian_rejected_messages_total{cause=\"non_finite\"} 2", "meridian_checkpoint_age_seconds ",
        "meridian_site_info{site=\"oregon\",algorithm=\"sgp\"} 1"}) {
    CHECK_THAT(body, Contains(name));
  }
  CHECK_THAT(http_get(server.port(), "/nothing-here"), Contains("404"));
}

TEST_CASE("/metrics over HTTP passes promtool check metrics", "[daemon][metrics][unit]") {
  if (!have_promtool()) {
    WARN("SKIPPED: promtool not installed (Debian package prometheus); the exposition was not linted");
    return;
  }
  DaemonMetrics metrics("oregon", "sgp");
  populate(metrics);
  MetricsServer server(metrics.registry(), "127.0.0.1:0");
  const auto response = http_get(server.port(), "/metrics");
  REQUIRE_THAT(response, Contains("200 OK"));
  meridian::tests::TempDir tmp;
  const auto file = tmp.path() / "metrics.txt";
  std::ofstream(file) << meridian::tests::http_body(response);
  const auto out = tmp.path() / "promtool.out";
  const std::string cmd = "promtool check metrics < " + file.string() + " > " + out.string() + " 2>&1";
  const int rc = std::system(cmd.c_str());
  std::ifstream in(out);
  const std::string promtool_output((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  INFO("promtool said: " << promtool_output);
  CHECK(rc == 0);
  CHECK(promtool_output.empty());
}

TEST_CASE("a bad or busy metrics address gives a clear error", "[daemon][metrics][cluster]") {
  MetricsRegistry registry;
  CHECK_THROWS_WITH(MetricsServer(registry, "9400"), Contains("'9400'") && Contains("no port"));
  CHECK_THROWS_WITH(MetricsServer(registry, "127.0.0.1:http"), Contains("not a number"));
  CHECK_THROWS_WITH(MetricsServer(registry, "127.0.0.1:70000"), Contains("not a number in 0..65535"));
  MetricsServer first(registry, "127.0.0.1:0");
  CHECK_THROWS_WITH(MetricsServer(registry, "127.0.0.1:" + std::to_string(first.port())),
                    Contains("cannot listen there"));
}

TEST_CASE("the metrics server starts and stops cleanly many times", "[daemon][metrics][cluster]") {
  MetricsRegistry registry;
  registry.gauge("up", "Up.").set(1);
  for (int i = 0; i < 20; ++i) {
    int port = 0;
    {
      MetricsServer server(registry, "127.0.0.1:0");
      port = server.port();
      if (i % 5 == 0) CHECK_THAT(http_get(port, "/metrics"), Contains("up 1"));
    }
    // Stopped: the listening socket is closed (a connection is refused: http_get fetches nothing), and
    // the port is free again for a new server.
    INFO("round " << i << ", port " << port);
    CHECK(http_get(port, "/metrics").empty());
    if (i % 5 == 0) {
      MetricsServer again(registry, "127.0.0.1:" + std::to_string(port));
      CHECK(again.port() == port);
      CHECK_THAT(http_get(port, "/metrics"), Contains("up 1"));
    }
  }
}
