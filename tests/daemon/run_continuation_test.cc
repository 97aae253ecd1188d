// Restarting a finished federation with a longer --epochs, through real `meridian start` processes on
// 127.0.0.1 (docs/operations.md, "Run length"): the sites continue the finished run from its
// checkpoint to the end the new --epochs gives, agreeing on it as a new run does; restarted again
// with the same --epochs they have nothing left to train, say so, exit 3 and keep their result.json.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "daemon/site_daemon.h"
#include "tests/daemon/site_process.h"
#include "tests/support/file_contents.h"
#include "tests/support/small_table.h"
#include "tests/support/start_args.h"
#include "tests/support/temp_dir.h"

namespace fs = std::filesystem;
using meridian::tests::SiteProcess;
using meridian::tests::TempDir;
using meridian::tests::StartArgs;

namespace {

// Two sites of 32 rows each, batch 8: 4 steps per epoch.
StartArgs args_for(const std::string& name, int index, const fs::path& table, const std::string& epochs) {
  return StartArgs(name)
      .site(index, 2)
      .csv(table)
      .mlp(8)
      .set("--batch", 8)
      .set("--epochs", epochs)
      .set("--algo", "allreduce")
      .set("--round-timeout", 3)
      .set("--seed", 3);
}

struct Run {
  std::vector<int> exits;
  std::vector<std::string> logs;
  std::vector<nlohmann::json> results;
};

// Runs alpha and beta (which joins alpha) in `root`/alpha and `root`/beta until both exit.
Run run_both(const fs::path& root, const fs::path& table, const std::string& epochs,
             const std::string& beta_epochs = {}) {
  // Each start appends to the same log: only this run's part counts.
  std::vector<std::size_t> from;
  for (const auto* name : {"alpha", "beta"}) {
    const auto log = root / name / "log";
    from.push_back(fs::exists(log) ? meridian::tests::file_contents(log).size() : 0);
  }
  // The previous run's address stays in RUN_DIR/endpoint: beta must dial the new one.
  fs::remove(root / "alpha" / "endpoint");
  SiteProcess alpha(root / "alpha", args_for("alpha", 0, table, epochs));
  const auto endpoint = alpha.endpoint();
  REQUIRE_FALSE(endpoint.empty());
  SiteProcess beta(root / "beta",
                   args_for("beta", 1, table, beta_epochs.empty() ? epochs : beta_epochs).join(endpoint));
  Run run;
  for (auto* site : {&alpha, &beta}) run.exits.push_back(site->wait_exit());
  std::size_t i = 0;
  for (auto* site : {&alpha, &beta}) {
    run.logs.push_back(site->log().substr(from[i++]));
    run.results.push_back(site->has_result()
                              ? nlohmann::json::parse(meridian::tests::file_contents(site->run_dir() / "result.json"))
                              : nlohmann::json());
  }
  return run;
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("a finished federation restarted with a longer --epochs continues its run to the new end",
          "[daemon][restart][process]") {
  TempDir dir;
  const auto table = meridian::tests::write_small_table(dir.path(), "t.csv", {"dog", "cat"});

  const auto first = run_both(dir.path(), table, "1");
  INFO("alpha:\n" << first.logs[0] << "\nbeta:\n" << first.logs[1]);
  REQUIRE(first.exits == std::vector<int>{0, 0});
  for (const auto& r : first.results) {
    CHECK(r["steps"] == 4);
    CHECK(r["completed"] == true);
  }

  const auto longer = run_both(dir.path(), table, "3");
  INFO("alpha:\n" << longer.logs[0] << "\nbeta:\n" << longer.logs[1]);
  REQUIRE(longer.exits == std::vector<int>{0, 0});
  for (std::size_t i = 0; i < 2; ++i) {
    CHECK(contains(longer.logs[i], "the checkpoint's run finished at round"));
    CHECK(contains(longer.logs[i], "after 4 steps; --epochs 3 gives 12: continuing it by 8 steps"));
    CHECK(contains(longer.logs[i], "(8 more steps)"));
    // The run counts from its first step: 4 before the restart and 8 after.
    CHECK(longer.results[i]["steps"] == 12);
    CHECK(longer.results[i]["completed"] == true);
  }

  // Started again as a service manager would restart them: nothing to train, the exit code that
  // meridian@.service does not restart, and the run's result.json as the run wrote it (its traffic and
  // times, not an empty run's).
  const auto again = run_both(dir.path(), table, "3");
  INFO("alpha:\n" << again.logs[0] << "\nbeta:\n" << again.logs[1]);
  REQUIRE(again.exits ==
          std::vector<int>{meridian::daemon::kExitRunFinishedBefore, meridian::daemon::kExitRunFinishedBefore});
  CHECK(meridian::daemon::kExitRunFinishedBefore == 3);
  for (std::size_t i = 0; i < 2; ++i) {
    CHECK(contains(again.logs[i], "after 12 steps and --epochs 3 gives no more (12 steps): nothing to train"));
    CHECK(contains(again.logs[i], "the run had finished before this start (round 28): result"));
    CHECK(contains(again.logs[i], "kept; exit code 3"));
    CHECK_FALSE(contains(again.logs[i], "continuing"));
    CHECK(again.results[i] == longer.results[i]);
    CHECK(again.results[i]["bytes_sent"] > 0);
  }

  // One site wants more, the other does not: the finished run's end stands, and the first says how to
  // continue.
  const auto split = run_both(dir.path(), table, "5", "3");
  INFO("alpha:\n" << split.logs[0] << "\nbeta:\n" << split.logs[1]);
  REQUIRE(split.exits == std::vector<int>{0, meridian::daemon::kExitRunFinishedBefore});
  CHECK(contains(split.logs[0], "--epochs 5 gives 20: continuing it by 8 steps"));
  CHECK(contains(split.logs[0], "the federation does not continue the finished run (another site's run has ended)"));
  CHECK(contains(split.logs[0], "restart every site with the longer --epochs to continue it"));
  CHECK(contains(split.logs[1], "nothing to train"));
  for (const auto& r : split.results) CHECK(r["steps"] == 12);
}
