// Gauges that nobody measured yet are absent from /metrics rather than a made-up 0: the daemon's loss,
// accuracy and throughput appear with their first measurement.
#include <catch2/catch.hpp>

#include <string>

#include "daemon/metrics/daemon_metrics.h"
#include "daemon/metrics/metrics_registry.h"

using namespace meridian::daemon;
using Catch::Matchers::Contains;

namespace {

bool has_sample(const std::string& exposition, const std::string& name) {
  return exposition.find("\n" + name + " ") != std::string::npos;
}

}  // namespace

TEST_CASE("a gauge created absent is left out of the exposition until set, and again once cleared",
          "[daemon][metrics][unit]") {
  MetricsRegistry registry;
  Gauge& measured = registry.gauge_once_measured("x_accuracy", "Accuracy.");
  Gauge& plain = registry.gauge("x_step", "Step.");
  CHECK_FALSE(measured.present());
  CHECK(plain.present());
  std::string text = registry.render();
  CHECK_THAT(text, Contains("# TYPE x_accuracy gauge"));  // the family is declared, without a sample
  CHECK_FALSE(has_sample(text, "x_accuracy"));
  CHECK(has_sample(text, "x_step"));

  measured.set(0.0);  // a measured 0 is a value like any other
  CHECK(has_sample(registry.render(), "x_accuracy"));
  measured.clear();
  CHECK_FALSE(has_sample(registry.render(), "x_accuracy"));
  measured.add(0.25);
  text = registry.render();
  CHECK_THAT(text, Contains("\nx_accuracy 0.25\n"));
}

TEST_CASE("a new daemon exposes no loss, accuracy or throughput before it measured them", "[daemon][metrics][unit]") {
  DaemonMetrics metrics("alpha", "sgp");
  std::string text = metrics.registry().render();
  for (const char* name : {"meridian_train_loss", "meridian_test_accuracy", "meridian_samples_per_second",
                           "meridian_total_steps", "meridian_progress_ratio", "meridian_eta_seconds"}) {
    INFO(name);
    CHECK_FALSE(has_sample(text, name));
  }
  CHECK(has_sample(text, "meridian_step"));  // steps are counted from 0, so 0 is true
  metrics.train_loss.set(2.3);
  metrics.test_accuracy.set(0.1);
  text = metrics.registry().render();
  CHECK(has_sample(text, "meridian_train_loss"));
  CHECK(has_sample(text, "meridian_test_accuracy"));
  CHECK_FALSE(has_sample(text, "meridian_samples_per_second"));
}
