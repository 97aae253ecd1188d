// DaemonMetrics::forget_peer: a peer that left the view takes its labelled series out of the
// exposition, so that churn does not grow /metrics forever, and leaves everybody else's alone.
#include <catch2/catch.hpp>

#include <string>

#include "daemon/metrics/daemon_metrics.h"

using meridian::daemon::DaemonMetrics;

namespace {

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("a forgotten peer's labelled series leave the exposition; the others and the site's own stay",
          "[unit][daemon][metrics]") {
  DaemonMetrics metrics("oregon", "sgp");
  for (const std::string peer : {"ohio", "tokyo"}) {
    metrics.peer_rtt_seconds.with({peer}).set(0.05);
    metrics.peer_sent_bytes.with({peer}).inc(1000);
    metrics.peer_received_bytes.with({peer}).inc(2000);
  }
  metrics.rejected_messages.with({"fingerprint"}).inc();
  metrics.step.set(42);
  const auto before = metrics.registry().render();
  REQUIRE(has(before, "meridian_peer_rtt_seconds{peer=\"ohio\"} 0.05\n"));
  REQUIRE(has(before, "meridian_peer_sent_bytes_total{peer=\"ohio\"} 1000\n"));
  REQUIRE(has(before, "meridian_peer_received_bytes_total{peer=\"ohio\"} 2000\n"));

  metrics.forget_peer("ohio");
  const auto after = metrics.registry().render();
  CHECK_FALSE(has(after, "peer=\"ohio\""));
  CHECK(has(after, "meridian_peer_rtt_seconds{peer=\"tokyo\"} 0.05\n"));
  CHECK(has(after, "meridian_peer_sent_bytes_total{peer=\"tokyo\"} 1000\n"));
  CHECK(has(after, "meridian_peer_received_bytes_total{peer=\"tokyo\"} 2000\n"));
  CHECK(has(after, "meridian_rejected_messages_total{cause=\"fingerprint\"} 1\n"));
  CHECK(has(after, "meridian_step 42\n"));
  CHECK(has(after, "meridian_site_info{site=\"oregon\",algorithm=\"sgp\"} 1\n"));
  for (const auto* family : {&metrics.peer_sent_bytes, &metrics.peer_received_bytes}) CHECK(family->size() == 1);
  CHECK(metrics.peer_rtt_seconds.size() == 1);

  // A peer forgotten twice, or never known, changes nothing.
  metrics.forget_peer("ohio");
  metrics.forget_peer("nobody");
  for (const auto* family : {&metrics.peer_sent_bytes, &metrics.peer_received_bytes}) CHECK(family->size() == 1);
  CHECK(metrics.peer_rtt_seconds.size() == 1);
  CHECK(has(metrics.registry().render(), "meridian_peer_sent_bytes_total{peer=\"tokyo\"} 1000\n"));

  // One that comes back counts afresh: its old totals are not carried into the new series.
  metrics.peer_sent_bytes.with({"ohio"}).inc(10);
  CHECK(has(metrics.registry().render(), "meridian_peer_sent_bytes_total{peer=\"ohio\"} 10\n"));
}
