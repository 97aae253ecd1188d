// The exit status of a real `meridian` process for an error of each tier (error/exit_code.h): the number
// a service manager decides on (packaging/meridian@.service restarts a peer or internal failure, not a
// user error).
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>

#include "error/exit_code.h"
#include "tests/daemon/site_process.h"
#include "tests/support/meridian_command.h"
#include "tests/support/small_table.h"
#include "tests/support/start_args.h"
#include "tests/support/temp_dir.h"

namespace {

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("a configuration the site cannot run exits with the user error code", "[cli][errors][process]") {
  meridian::tests::TempDir dir;
  const auto config = dir.path() / "site.toml";
  std::ofstream(config) << "name = \"oregon\"\nalgo = \"gossip\"\n";
  const auto r = meridian::tests::run_meridian("start --config " + config.string() + " --insecure --run-dir " +
                                               (dir.path() / "run").string());
  INFO(r.output);
  CHECK(r.exit_code == meridian::error::kExitUser);
  CHECK(contains(r.output, "meridian: error: "));
  CHECK(contains(r.output, "gossip"));
}

TEST_CASE("a site whose federation never answers exits with the peer error code", "[cli][errors][process]") {
  meridian::tests::TempDir dir;
  const auto table = meridian::tests::write_small_table(dir.path(), "table.csv", {"even", "odd"});
  // Site 0 of two waits for the other, which never comes: the federation is unavailable, not the
  // operator's input wrong, and a later start may find it.
  meridian::tests::SiteProcess alone(
      dir.path() / "alone",
      meridian::tests::StartArgs("alone").site(0, 2).set("--join-timeout", "0.5").csv(table).mlp(8));
  const int code = alone.wait_exit();
  INFO(alone.log());
  CHECK(code == meridian::error::kExitPeer);
  CHECK(contains(alone.log(), "meridian: error: gave up after --join-timeout 500 ms"));
}

TEST_CASE("a platform failure under meridian exits with the internal error code", "[cli][errors][process]") {
  // Memory that runs out is a failure of the platform under Meridian, the one way to reach the internal
  // tier from outside without a bug: the same command that trains a small model under a 512 MiB address
  // space limit cannot allocate a hidden layer of 30 million units there (within the model size caps,
  // so no check refuses it first). std::bad_alloc is no error::Error: it stands for every exception
  // that Meridian's code did not classify.
  meridian::tests::TempDir dir;
  const auto table = meridian::tests::write_small_table(dir.path(), "table.csv", {"even", "odd"});
  const auto train = [&](const std::string& width) {
    return meridian::tests::run_shell("ulimit -v 524288 && " + std::string(meridian::tests::meridian_binary()) +
                                      " train --train " + table.string() + " --model mlp --epochs 1 --widths " +
                                      width + " 2>&1");
  };
  const auto small = train("16");
  INFO(small.output);
  REQUIRE(small.exit_code == 0);
  const auto huge = train("30000000");
  INFO(huge.output);
  CHECK(huge.exit_code == meridian::error::kExitInternal);
  CHECK(contains(huge.output, "meridian: internal error: out of memory"));
}
