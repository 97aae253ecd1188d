// How long a starting site waits for its federation, through real `meridian start` processes on
// 127.0.0.1 (docs/operations.md, "Starting"): training begins once --min-sites sites (default
// --site-count) are in the view; a site that does not see them within --join-timeout seconds gives up
// with the peer tier's exit code (error/exit_code.h) and the list of the sites it did reach, so that the operator sees who is missing.
// The sites train on a small CSV table, which they load in milliseconds.
#include <catch2/catch.hpp>

#include <signal.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "error/exit_code.h"
#include "tests/daemon/site_process.h"
#include "tests/support/small_table.h"
#include "tests/support/start_args.h"
#include "tests/support/temp_dir.h"

namespace fs = std::filesystem;
using meridian::tests::SiteProcess;
using meridian::tests::TempDir;
using meridian::tests::StartArgs;

namespace {

// Site `name` of a federation of `site_count` that waits for `min_sites` of them (0: all) for at most
// `join_timeout` seconds.
StartArgs site_args(const std::string& name, int index, int site_count, int min_sites, const std::string& join_timeout,
                    const fs::path& table) {
  return StartArgs(name)
      .site(index, site_count)
      .set("--min-sites", min_sites)
      .set("--join-timeout", join_timeout)
      .csv(table)
      .mlp(8)
      .set("--batch", 8)
      .set("--algo", "allreduce")
      .set("--seed", 3);
}

}  // namespace

TEST_CASE("a site alone past --join-timeout gives up with the peer exit code, naming the only site it reached",
          "[process][daemon][join]") {
  TempDir dir;
  const auto table = meridian::tests::write_small_table(dir.path(), "table.csv", {"even", "odd"});
  SiteProcess alone(dir.path() / "alone", site_args("alone", 0, 2, 0, "0.5", table));
  const int code = alone.wait_exit();
  INFO(alone.log());
  CHECK(code == meridian::error::kExitPeer);
  CHECK(alone.log().find("meridian: error: gave up after --join-timeout 500 ms: 1 of 2 sites reachable (alone); "
                         "check --join addresses, the roster and that the other sites are running") !=
        std::string::npos);
  CHECK_FALSE(alone.has_result());
  CHECK(alone.checkpoints().empty());  // it never trained
}

TEST_CASE("a site short of --min-sites past --join-timeout names the sites it reached and how many it needed",
          "[process][daemon][join]") {
  TempDir dir;
  const auto table = meridian::tests::write_small_table(dir.path(), "table.csv", {"even", "odd"});
  // Four sites in the federation, of which `patient` waits for all and `hasty` for three; only these two
  // run. `patient` outwaits the test.
  const auto launched = std::chrono::steady_clock::now();
  SiteProcess patient(dir.path() / "patient", site_args("patient", 0, 4, 0, "600", table));
  const auto endpoint = patient.endpoint();
  REQUIRE_FALSE(endpoint.empty());
  // How long `patient` took from its launch to listening is this machine's pace now. `hasty` only has
  // to reach a site that already listens, which is far less work: ten times that, plus a second, is
  // its deadline, so that a loaded machine cannot make it give up before it reached `patient`.
  const double pace = std::chrono::duration<double>(std::chrono::steady_clock::now() - launched).count();
  SiteProcess hasty(dir.path() / "hasty",
                    site_args("hasty", 1, 4, 3, std::to_string(10 * pace + 1), table).join(endpoint));

  const int code = hasty.wait_exit();
  const auto log = hasty.log();
  INFO("hasty:\n" << log << "\npatient:\n" << patient.log());
  CHECK(code == meridian::error::kExitPeer);
  CHECK(log.find("waiting for 3 sites in the view") != std::string::npos);
  CHECK(log.find("meridian: error: gave up after --join-timeout ") != std::string::npos);
  CHECK(log.find(": 2 of 3 sites reachable (hasty, patient); check --join addresses") != std::string::npos);
  CHECK_FALSE(hasty.has_result());
  // The site that still waits saw `hasty` come; it is not bound by the other's deadline.
  CHECK_FALSE(patient.exited());
  patient.signal(SIGINT);
  CHECK(patient.wait_exit() == 0);
}
