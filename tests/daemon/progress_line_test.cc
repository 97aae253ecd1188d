#include <catch2/catch.hpp>

#include <cmath>

#include "daemon/status/human_format.h"
#include "daemon/status/progress_line.h"

using namespace meridian::daemon;

TEST_CASE("the progress line shows step, epoch, loss, accuracy, peers, staleness and traffic",
          "[daemon][progress][unit]") {
  Progress p;
  p.step = 1200;
  p.total_steps = 5000;
  p.epoch = 3;
  p.total_epochs = 5;
  p.loss = 0.41234;
  p.accuracy = 0.8625;
  p.peers_alive = 3;
  p.peers_known = 4;
  p.staleness = 1;
  p.bytes_per_second = 2.4e6;
  CHECK(format_progress_line(p) ==
        "step 1200/5000 (24.0%)  epoch 3/5  loss 0.4123  acc 86.2%  peers 3/4  stale 1  2.4 MB/s");
  Progress timed = p;  // once the pace is measured, the time left
  timed.eta_seconds = 190;
  CHECK(format_progress_line(timed) ==
        "step 1200/5000 (24.0%)  epoch 3/5  loss 0.4123  acc 86.2%  peers 3/4  stale 1  2.4 MB/s  eta 3 min 10 s");
  timed.step = 5000;  // the last step: nothing left to estimate
  timed.eta_seconds = 0;
  CHECK(format_progress_line(timed).ends_with("2.4 MB/s"));

  Progress start;  // before anything is known
  start.peers_alive = 1;
  start.peers_known = 1;
  CHECK(format_progress_line(start) == "step 0  epoch 0  loss 0  acc -  peers 1/1  stale 0  0 B/s");

  Progress diverged = p;
  diverged.loss = std::nan("");
  diverged.bytes_per_second = 999.4;
  CHECK(format_progress_line(diverged) ==
        "step 1200/5000 (24.0%)  epoch 3/5  loss nan  acc 86.2%  peers 3/4  stale 1  999 B/s");
  diverged.loss = 12345.678;
  CHECK_THAT(format_progress_line(diverged), Catch::Matchers::Contains("loss 1.235e+04"));
}

TEST_CASE("bytes, rates and durations are formatted for people", "[daemon][progress][unit]") {
  CHECK(format_bytes(0) == "0 B");
  CHECK(format_bytes(999) == "999 B");
  CHECK(format_bytes(1000) == "1.0 kB");
  CHECK(format_bytes(1500) == "1.5 kB");
  CHECK(format_bytes(24e6) == "24 MB");
  CHECK(format_bytes(999.6e6) == "1.0 GB");
  CHECK(format_bytes(3.14e18) == "3140 PB");
  CHECK(format_bytes(-1) == "-");
  CHECK(format_rate(5e4) == "50 kB/s");
  CHECK(format_rate(std::nan("")) == "-");
  CHECK(format_duration(0.05) == "50 ms");
  CHECK(format_count(1, "site") == "1 site");
  CHECK(format_count(0, "site") == "0 sites");
  CHECK(format_count(3, "site") == "3 sites");
  CHECK(format_duration(42.9) == "42 s");
  CHECK(format_duration(192) == "3 min 12 s");
  CHECK(format_duration(3725) == "1 h 02 min");
  CHECK(format_duration(2 * 86400 + 3 * 3600 + 5) == "2 d 03 h");
  CHECK(format_duration(-1) == "-");
}
