// DP-SGD through real `meridian start` processes on a part of Fashion-MNIST: the budget stops training
// before the step that would exceed it, a restarted site keeps what it spent (from its checkpoint), a
// checkpoint whose budget record was altered is refused, and a model with batch norm is refused at
// the configuration check, naming GroupNorm.
#include <catch2/catch.hpp>

#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "daemon/checkpoint/checkpoint.h"
#include "privacy/rdp_accountant.h"
#include "tests/daemon/site_process.h"
#include "tests/support/fashion_mnist.h"
#include "tests/support/file_contents.h"
#include "tests/support/start_args.h"
#include "tests/support/temp_dir.h"

namespace fs = std::filesystem;
using meridian::tests::SiteProcess;
using meridian::tests::TempDir;
using meridian::tests::StartArgs;

namespace {

constexpr std::size_t kRows = 3000;  // a twentieth of Fashion-MNIST's 60,000
constexpr std::size_t kBatch = 64;
constexpr double kNoise = 1.0, kDelta = 1e-5;
constexpr std::uint64_t kStepsWithin = 30;  // of the 2 epochs' 94 planned steps

// The budget that 30 steps exactly spend: the 31st would exceed it.
double budget() {
  const meridian::privacy::RdpAccountant accountant(static_cast<double>(kBatch) / kRows, kNoise);
  return accountant.spent_after(kStepsWithin, kDelta).epsilon;
}

std::string exact(double v) {
  char text[40];
  std::snprintf(text, sizeof text, "%.17g", v);
  return text;
}

StartArgs dp_site(const std::string& model = "mlp") {
  return StartArgs("s0")
      .site(0, 20)
      .set("--algo", "local")
      .set("--model", model)
      .set("--widths", 16)
      .set("--batch", static_cast<int>(kBatch))
      .set("--epochs", 2)
      .set("--seed", 7)
      .set("--lr", "0.1")
      .set("--optimizer", "sgd")
      .set("--dp-epsilon", exact(budget()))
      .set("--dp-noise-multiplier", exact(kNoise))
      .set("--dp-delta", exact(kDelta))
      .set("--dp-clip", 1)
      .set("--data-dir", meridian::tests::fashion_mnist_dir());
}

nlohmann::json result_of(const SiteProcess& site) {
  return nlohmann::json::parse(meridian::tests::file_contents(site.run_dir() / "result.json"));
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("DP-SGD stops before the step that would exceed the budget, and a restart keeps the budget spent",
          "[process][daemon][dp]") {
  MERIDIAN_SKIP_WITHOUT_FASHION_MNIST();
  TempDir dir;
  const fs::path run = dir.path() / "s0";
  fs::path final_file;
  {
    SiteProcess site(run, dp_site());
    const int rc = site.wait_exit(std::chrono::seconds(300));
    INFO(site.log());
    REQUIRE(rc == 0);
    CHECK(contains(site.log(), "DP-SGD budget reached"));
    const auto result = result_of(site);
    CHECK(result["steps"].get<std::uint64_t>() == kStepsWithin);
    CHECK(result["completed"] == false);
    CHECK(result["dp_epsilon"].get<double>() <= budget());
    CHECK(result["dp_epsilon"].get<double>() == Approx(budget()).epsilon(1e-9));
    CHECK(result["dp_delta"].get<double>() == kDelta);
    final_file = result["final_checkpoint"].get<std::string>();
  }
  const auto checkpoint = meridian::daemon::read_checkpoint_file(final_file);
  // The restarts below append to the same log: what they wrote starts here.
  const std::size_t first_log = meridian::tests::file_contents(run / "log").size();
  REQUIRE_FALSE(checkpoint.privacy_budget.empty());
  CHECK(checkpoint.step == kStepsWithin);

  SECTION("restarted, the site has no budget left for another step") {
    SiteProcess again(run, dp_site());
    const int rc = again.wait_exit(std::chrono::seconds(300));
    const std::string log = again.log().substr(first_log);
    INFO(log);
    REQUIRE(rc == 0);
    CHECK(contains(log, "resuming from"));
    CHECK(contains(log, "DP-SGD budget reached"));
    CHECK(contains(log, "(delta 1e-05, 30 steps)"));
    // No step taken: the run's count stays where the budget stopped it.
    CHECK(result_of(again)["steps"].get<std::uint64_t>() == kStepsWithin);
    CHECK(meridian::daemon::read_checkpoint_file(result_of(again)["final_checkpoint"].get<std::string>()).step ==
          kStepsWithin);
  }
  SECTION("a checkpoint whose budget record was altered is refused") {
    auto altered = checkpoint;
    // The step count is the record's last field before its 32-byte tag: one step fewer than spent.
    altered.privacy_budget[altered.privacy_budget.size() - 32 - 8] -= 1;
    REQUIRE_FALSE(meridian::daemon::write_checkpoint_file(final_file, altered.view()));  // a valid CRC
    SiteProcess again(run, dp_site());
    const int rc = again.wait_exit(std::chrono::seconds(300));
    const std::string log = again.log().substr(first_log);
    INFO(log);
    CHECK(rc != 0);
    CHECK(contains(log, "the privacy budget record does not match its seal"));
    CHECK_FALSE(contains(log, "DP-SGD budget reached"));
  }
}

TEST_CASE("DP-SGD refuses a model with batch norm at the configuration check, naming GroupNorm",
          "[process][daemon][dp]") {
  MERIDIAN_SKIP_WITHOUT_FASHION_MNIST();
  TempDir dir;
  SiteProcess site(dir.path() / "s0", dp_site("mlp-bn"));
  const int rc = site.wait_exit(std::chrono::seconds(300));
  INFO(site.log());
  CHECK(rc != 0);
  CHECK(contains(site.log(), "--dp-*: DP-SGD cannot run on this model"));
  CHECK(contains(site.log(), "batch_norm1d"));
  CHECK(contains(site.log(), "GroupNorm"));
  CHECK_FALSE(site.has_result());
}
