// A secure site never trains alone by mistake, through real `meridian start` processes on 127.0.0.1:
// with a roster of three and no --min-sites a site waits for the other two; a roster's quorum lets
// two of three train; a roster that lacks one site at one site makes the waiting lines name the cause
// (the site whose roster lacks it, the site it refused, the site that sees both), and the site whose
// roster lacks a member says so in its log and its status.
#include <catch2/catch.hpp>

#include <signal.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "peer/curve_keys.h"
#include "tests/daemon/site_process.h"
#include "tests/support/meridian_command.h"
#include "tests/support/small_table.h"
#include "tests/support/start_args.h"
#include "tests/support/temp_dir.h"

namespace fs = std::filesystem;
using meridian::tests::eventually_from_process;
using meridian::tests::SiteProcess;
using meridian::tests::TempDir;
using meridian::tests::StartArgs;

namespace {

// One site of its own data (site-count 1, as a hospital runs), secure with its keys and `roster`.
StartArgs args_for(const std::string& name, const fs::path& dir, const fs::path& table, const fs::path& roster) {
  return StartArgs(name)
      .site(0, 1)
      .csv(table)
      .mlp(8)
      .set("--epochs", 1)
      .set("--batch", 8)
      .set("--join-timeout", 600)
      .secure(dir / ("keys-" + name), roster);
}

std::map<std::string, std::string> make_keys(const fs::path& dir, const std::vector<std::string>& names) {
  std::map<std::string, std::string> keys;
  for (const auto& name : names) {
    const auto pair = meridian::peer::generate_curve_key_pair();
    meridian::peer::write_key_pair(pair, dir / ("keys-" + name));
    keys[name] = pair.public_key;
  }
  return keys;
}

fs::path write_roster(const fs::path& file, const std::map<std::string, std::string>& keys,
                      const std::vector<std::string>& names, const std::string& head = "") {
  std::ofstream out(file);
  out << head;
  for (const auto& name : names) out << name << " " << keys.at(name) << "\n";
  return file;
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// Whether a "waiting for" line of `site`'s log holds every one of `parts` (waits for one, or the exit).
bool waiting_line_says(const SiteProcess& site, const std::vector<std::string>& parts) {
  bool found = false;
  eventually_from_process([&] {
    const auto log = site.log();
    for (auto at = log.find("waiting for "); at != std::string::npos; at = log.find("waiting for ", at + 1)) {
      const auto line = log.substr(at, log.find('\n', at) - at);
      if (std::all_of(parts.begin(), parts.end(), [&](const std::string& p) { return contains(line, p); })) {
        found = true;
        return true;
      }
    }
    return site.exited();
  });
  return found;
}

}  // namespace

TEST_CASE("a site of a three-site roster without --min-sites waits for the others instead of training alone",
          "[daemon][join][process]") {
  TempDir dir;
  const auto table = meridian::tests::write_small_table(dir.path(), "t.csv", {"dog", "cat"});
  const auto keys = make_keys(dir.path(), {"alpha", "beta", "gamma"});
  const auto roster = write_roster(dir.path() / "roster.txt", keys, {"alpha", "beta", "gamma"});
  SiteProcess alpha(dir.path() / "alpha", args_for("alpha", dir.path(), table, roster));
  const bool waits = waiting_line_says(alpha, {"waiting for 3 sites in the view (min-sites 3: the roster's size (3 "
                                               "sites); have 1: alpha)"});
  INFO(alpha.log());
  REQUIRE(waits);
  CHECK(contains(alpha.log(), "min-sites 3: the roster's size (3 sites)\n"));
  CHECK_FALSE(contains(alpha.log(), "training alone"));
  CHECK_FALSE(alpha.exited());
  const auto status = meridian::tests::run_meridian("status --socket " + (alpha.run_dir() / "control.sock").string());
  INFO(status.output);
  CHECK(contains(status.output, "note        waiting for 3 sites in the view (min-sites 3: the roster's size"));
  alpha.signal(SIGINT);
  CHECK(alpha.wait_exit() == 0);
  CHECK_FALSE(alpha.has_result());  // it never trained

  // Training alone is an explicit choice, and the log says so twice.
  SiteProcess lone(dir.path() / "alone", args_for("alpha", dir.path(), table, roster).set("--min-sites", 1));
  CHECK(lone.wait_exit() == 0);
  const auto log = lone.log();
  INFO(log);
  CHECK(contains(log, "min-sites 1: --min-sites 1 given\n"));
  CHECK(contains(log, "--min-sites 1 is below the roster's size (it lists 3 sites): training may start with 1 site "
                      "only"));
  CHECK(contains(log, "training alone: the view holds only this site (min-sites 1: --min-sites 1 given)"));
}

TEST_CASE("a roster's quorum lets two of its three sites train", "[daemon][join][process]") {
  TempDir dir;
  const auto table = meridian::tests::write_small_table(dir.path(), "t.csv", {"dog", "cat"});
  const auto keys = make_keys(dir.path(), {"alpha", "beta", "gamma"});
  const auto roster = write_roster(dir.path() / "roster.txt", keys, {"alpha", "beta", "gamma"}, "quorum = 2\n");
  SiteProcess alpha(dir.path() / "alpha", args_for("alpha", dir.path(), table, roster));
  const auto endpoint = alpha.endpoint();
  REQUIRE_FALSE(endpoint.empty());
  SiteProcess beta(dir.path() / "beta", args_for("beta", dir.path(), table, roster).join("alpha@" + endpoint));
  for (auto* site : {&alpha, &beta}) {
    CHECK(site->wait_exit() == 0);
    const auto log = site->log();
    INFO(log);
    CHECK(contains(log, "min-sites 2: quorum 2 from the roster (it lists 3 sites)\n"));
    CHECK(contains(log, "alpha, beta (2 sites)"));
    CHECK(site->has_result());
  }
}

TEST_CASE("a roster that lacks one site at one site: the waiting lines name the cause", "[daemon][join][process]") {
  TempDir dir;
  const auto table = meridian::tests::write_small_table(dir.path(), "t.csv", {"dog", "cat"});
  const auto keys = make_keys(dir.path(), {"alpha", "beta", "gamma"});
  // alpha's roster lacks gamma; beta's and gamma's list all three. alpha is told to wait for three
  // sites, so that it cannot start with beta alone.
  const auto short_roster = write_roster(dir.path() / "alpha-roster.txt", keys, {"alpha", "beta"});
  const auto roster = write_roster(dir.path() / "roster.txt", keys, {"alpha", "beta", "gamma"});
  SiteProcess alpha(dir.path() / "alpha", args_for("alpha", dir.path(), table, short_roster).set("--min-sites", 3));
  const auto endpoint = alpha.endpoint();
  REQUIRE_FALSE(endpoint.empty());
  SiteProcess beta(dir.path() / "beta", args_for("beta", dir.path(), table, roster).join("alpha@" + endpoint));
  const auto beta_endpoint = beta.endpoint();
  REQUIRE_FALSE(beta_endpoint.empty());
  // gamma joins through both: alpha refuses it, beta admits it.
  SiteProcess gamma(dir.path() / "gamma",
                    args_for("gamma", dir.path(), table, roster).join("alpha@" + endpoint + ",beta@" + beta_endpoint));

  // beta admits both and hears from both: it names the causes from alpha's and gamma's reports, and
  // says why its view of the three sites does not come into force (alpha, which refuses gamma, never
  // holds it), so that it never starts in a view whose members cannot exchange a run plan.
  CHECK(waiting_line_says(beta, {"(alpha,beta,gamma) is not in force here until alpha holds it too"}));
  const bool beta_told = waiting_line_says(
      beta, {"as far as this site knows: gamma is not reachable from alpha: ",
             "alpha's roster does not list gamma (as alpha reports)"});
  // gamma was refused by the site it joins through.
  const bool gamma_told =
      waiting_line_says(gamma, {"this site is not reachable from alpha: alpha refused this site's key"});
  // alpha: its roster lacks a member that beta holds.
  const bool alpha_told = waiting_line_says(alpha, {"gamma is not reachable from here: this site's roster does not "
                                                    "list gamma"});
  INFO("alpha:\n" << alpha.log() << "\nbeta:\n" << beta.log() << "\ngamma:\n" << gamma.log());
  CHECK(beta_told);
  CHECK(gamma_told);
  CHECK(alpha_told);
  // No site started in the view of all three (the start line names its sites and their count).
  for (const auto* site : {&alpha, &beta, &gamma}) CHECK_FALSE(contains(site->log(), "alpha, beta, gamma (3 sites)"));
  CHECK(contains(alpha.log(), "'gamma' is a member at beta, but this site's roster " + short_roster.string() +
                                  " does not list it"));
  const auto status = meridian::tests::run_meridian("status --socket " + (alpha.run_dir() / "control.sock").string());
  INFO(status.output);
  CHECK(contains(status.output, "note        gamma is a member at beta but this site's roster (" +
                                    short_roster.string() + ") does not list it"));
  const auto json =
      meridian::tests::run_meridian("status --json --socket " + (alpha.run_dir() / "control.sock").string());
  CHECK(contains(json.output, "\"notes\": ["));
  for (auto* site : {&beta, &gamma, &alpha}) {
    site->signal(SIGINT);
    CHECK(site->wait_exit() == 0);
  }
}
