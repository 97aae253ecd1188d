// A site that joins a federation already training, through real `meridian start` processes on
// 127.0.0.1: it takes the run's last round from a peer that trains (daemon/federation/run_plan.h) instead of
// planning from its own data, so it ends with the others rather than waiting for rounds they never
// start. run_plan_test.cc covers the plan's encoding; this covers the agreement between processes.
#include <catch2/catch.hpp>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "daemon/checkpoint/checkpoint.h"
#include "daemon/control/control_client.h"
#include "tests/daemon/site_process.h"
#include "tests/support/fashion_mnist.h"
#include "tests/support/file_contents.h"
#include "tests/support/start_args.h"
#include "tests/support/temp_dir.h"

namespace fs = std::filesystem;
using meridian::tests::eventually_from_process;
using meridian::tests::SiteProcess;
using meridian::tests::TempDir;
using meridian::tests::StartArgs;

namespace {

// Site `index` of three on an iid split of Fashion-MNIST (312 steps per epoch), of which two suffice
// to start training.
StartArgs site_args(int index, const std::string& epochs) {
  return StartArgs("s" + std::to_string(index))
      .site(index, 3)
      .set("--min-sites", 2)
      .set("--algo", "allreduce")
      .set("--epochs", epochs)
      .set("--eval-every", 1000000)
      .set("--seed", 7);
}

std::uint64_t final_step(const SiteProcess& site) {
  const auto result = nlohmann::json::parse(meridian::tests::file_contents(site.run_dir() / "result.json"));
  return meridian::daemon::read_checkpoint_file(result["final_checkpoint"].get<std::string>()).step;
}

}  // namespace

TEST_CASE("a site that joins a running federation takes the end round from a peer and finishes with the others",
          "[process][daemon][plan][join]") {
  MERIDIAN_SKIP_WITHOUT_FASHION_MNIST();
  TempDir dir;
  // s0 and s1 plan 3 epochs (936 steps); the late s2 would plan 4 (1248) from its own data.
  SiteProcess s0(dir.path() / "s0", site_args(0, "3"));
  const auto endpoint = s0.endpoint();
  REQUIRE_FALSE(endpoint.empty());
  SiteProcess s1(dir.path() / "s1", site_args(1, "3").join(endpoint));
  // Late: s0 and s1 have agreed on the run and train before s2 exists.
  meridian::daemon::ControlClient control((s0.run_dir() / "control.sock").string());
  const bool training = eventually_from_process([&] {
    if (s0.exited()) return true;
    try {
      return control.status().state == "training";
    } catch (const std::exception&) {
      return false;  // the control socket is not up yet
    }
  });
  INFO("s0:\n" << s0.log());
  REQUIRE(training);
  REQUIRE_FALSE(s0.exited());
  SiteProcess s2(dir.path() / "s2", site_args(2, "4").join(endpoint));
  // While s2 trains, its status counts the federation's rounds (checked below against the run's).
  std::optional<meridian::daemon::StatusReport> late;
  meridian::daemon::ControlClient s2_control((s2.run_dir() / "control.sock").string());
  eventually_from_process([&] {
    if (s2.exited()) return true;
    try {
      const auto status = s2_control.status();
      if (status.state == "training" && status.total_steps) late = status;
    } catch (const std::exception&) {
      return false;
    }
    return late.has_value();
  });
  REQUIRE(late);

  std::vector<int> codes;
  for (auto* s : {&s0, &s1, &s2}) codes.push_back(s->wait_exit(std::chrono::seconds(600)));
  const auto log = s2.log();
  INFO("s1:\n" << s1.log() << "\ns2:\n" << log);
  for (const int code : codes) REQUIRE(code == 0);

  // s0 and s1 started together and planned 3 epochs from the round they started at.
  std::smatch view;
  const auto s0_log = s0.log();
  REQUIRE(std::regex_search(s0_log, view, std::regex("view [0-9]+ from round ([0-9]+): ")));
  const auto run_start = std::stoull(view[1]);
  // s2 started in a later view, and took the run's end from a peer rather than from its own 4 epochs.
  REQUIRE(std::regex_search(log, view, std::regex("view [0-9]+ from round ([0-9]+): ")));
  CHECK(std::stoull(view[1]) > run_start);
  std::smatch plan;
  REQUIRE(
      std::regex_search(log, plan, std::regex("joining a running federation: 's[01]' trains until round ([0-9]+)")));
  const auto end_round = std::stoull(plan[1]);
  CHECK(end_round == run_start + 3 * 312);
  CHECK(*late->total_steps == 3 * 312);
  // Its step was the federation's round, past the rounds it trained itself.
  CHECK(late->step >= std::stoull(view[1]) - run_start);
  // Everybody ends at that round.
  CHECK(final_step(s0) == end_round);
  CHECK(final_step(s1) == end_round);
  CHECK(final_step(s2) == end_round);
}
