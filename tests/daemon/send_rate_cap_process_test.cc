// --max-send-rate through real `meridian start` processes: a site shows its cap in `meridian status`
// (text and JSON) and on /metrics, an sgp federation whose sites send under the cap still trains to
// the end, and what each site sent stays within the cap over its training (its burst, the rate times
// the training seconds in result.json, one chunk, and a little membership traffic before training). A
// slow machine only loosens that bound; without the cap the shares leave in a fraction of a second.
// tests/peer/send_rate_cap_test.cc holds the transport to it with WAN emulation on too.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>
#include <regex>
#include <string>

#include "peer/send_rate_limit.h"
#include "tests/daemon/http_get.h"
#include "tests/daemon/site_process.h"
#include "tests/support/file_contents.h"
#include "tests/support/meridian_command.h"
#include "tests/support/small_table.h"
#include "tests/support/start_args.h"
#include "tests/support/temp_dir.h"

using Catch::Matchers::Contains;
using meridian::tests::SiteProcess;
using meridian::tests::StartArgs;

TEST_CASE("a site sends under --max-send-rate, shows the cap in status and /metrics, and still trains to the end",
          "[daemon][process]") {
  meridian::tests::TempDir dir;
  const auto table = meridian::tests::write_small_table(dir.path(), "t.csv", {"dog", "cat"});
  constexpr double kBitsPerSecond = 8e6;       // 1 MB/s
  constexpr double kShareBytes = 66818 * 4.0;  // one chunk: the whole share
  // 2 inputs, 256 and 256 hidden, 2 classes: 66,818 parameters, a 267 kB share per sgp step; 32 rows
  // per site in batches of 8 for 2 epochs: 8 steps, at least 2 MB per site, 2 s at the cap.
  auto args = [&](const std::string& name, int index) {
    return StartArgs(name)
        .site(index, 2)
        .csv(table)
        .set("--model", "mlp")
        .set("--widths", "256,256")
        .set("--batch", 8)
        .set("--epochs", 2)
        .set("--algo", "sgp")
        .set("--max-send-rate", "8mbit")
        .set("--seed", 5);
  };
  SiteProcess alpha(dir.path() / "alpha", args("alpha", 0).set("--metrics-address", "127.0.0.1:0"));
  const auto endpoint = alpha.endpoint();
  REQUIRE_FALSE(endpoint.empty());

  // Alpha waits for beta: its status and metrics show the cap before any training.
  const auto socket = (alpha.run_dir() / "control.sock").string();
  REQUIRE(meridian::tests::eventually_from_process(
      [&] { return meridian::tests::run_meridian("status --socket " + socket).exit_code == 0 || alpha.exited(); }));
  const auto text = meridian::tests::run_meridian("status --socket " + socket);
  INFO(text.output);
  CHECK_THAT(text.output, Contains("send cap    1.0 MB/s (--max-send-rate)"));
  const auto json = meridian::tests::run_meridian("status --json --socket " + socket);
  REQUIRE(json.exit_code == 0);
  CHECK(nlohmann::json::parse(json.output)["max_send_bytes_per_second"] == kBitsPerSecond / 8);
  std::smatch port;
  const auto log = alpha.log();
  REQUIRE(std::regex_search(log, port, std::regex("metrics on http://127\\.0\\.0\\.1:([0-9]+)/metrics")));
  CHECK_THAT(meridian::tests::http_get(std::stoi(port[1]), "/metrics"),
             Contains("meridian_max_send_bytes_per_second 1e+06"));

  SiteProcess beta(dir.path() / "beta", args("beta", 1).join(endpoint));
  const int alpha_exit = alpha.wait_exit();
  const int beta_exit = beta.wait_exit();
  INFO("alpha:\n" << alpha.log() << "\nbeta:\n" << beta.log());
  REQUIRE(alpha_exit == 0);
  REQUIRE(beta_exit == 0);
  for (const auto* site : {&alpha, &beta}) {
    const auto result = nlohmann::json::parse(meridian::tests::file_contents(site->run_dir() / "result.json"));
    INFO(result.dump());
    // Before training a site sends only hellos, heartbeats, its plan and its data's moments: kilobytes.
    const double allowed = meridian::peer::SendRateLimit::default_burst_bytes(kBitsPerSecond) +
                           kBitsPerSecond / 8 * result["train_seconds"].get<double>() + kShareBytes + 64 * 1024;
    CHECK(result["completed"] == true);
    CHECK(result["steps"] == 8);
    const double sent = result["bytes_sent"].get<double>();
    CHECK(sent >= 7 * kShareBytes);  // at least seven of the eight steps' shares
    CHECK(sent <= allowed);
  }
}
