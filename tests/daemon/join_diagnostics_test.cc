// Why a joining site waits, said by the joiner itself, through real `meridian start` processes on
// 127.0.0.1: nobody listening at its --join address, the other site refusing its key (the ZAP denial
// reaches the joiner as a failed CURVE handshake), and a joiner without CURVE at a secure site. Each
// case is read from the joiner's log while it waits: the warning at once, then the same reason in its
// "waiting for N sites" lines.
#include <catch2/catch.hpp>

#include <signal.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "cli/loopback_ports.h"
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

// A site of two that waits (long) for the other, without keys unless secure() gives them. Two sites
// whatever its roster lists: alpha's lists only itself in the tests below, and must wait all the same.
StartArgs args_for(const std::string& name, int index, const fs::path& table) {
  return StartArgs(name)
      .site(index, 2)
      .set("--min-sites", 2)
      .csv(table)
      .mlp(8)
      .set("--epochs", 1)
      .set("--batch", 8)
      .set("--join-timeout", 600);
}

// Key pairs for `names` under `dir`/keys-NAME; the public keys by name.
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
                      const std::vector<std::string>& names) {
  std::ofstream out(file);
  for (const auto& name : names) out << name << " " << keys.at(name) << "\n";
  return file;
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// Waits until `site`'s log holds `part` in a "waiting for 2 sites" line (or the site exited).
bool waiting_line_says(const SiteProcess& site, const std::string& part) {
  return eventually_from_process([&] {
    const auto log = site.log();
    for (auto at = log.find("waiting for 2 sites"); at != std::string::npos;
         at = log.find("waiting for 2 sites", at + 1)) {
      if (log.substr(at, log.find('\n', at) - at).find(part) != std::string::npos) return true;
    }
    return site.exited();
  });
}

}  // namespace

TEST_CASE("a joiner with nobody listening at its --join address says so while it waits", "[daemon][join][process]") {
  TempDir dir;
  const auto table = meridian::tests::write_small_table(dir.path(), "t.csv", {"dog", "cat"});
  const auto port = meridian::cli::free_loopback_ports(1).at(0);
  const std::string address = "tcp://127.0.0.1:" + std::to_string(port);
  SiteProcess beta(dir.path() / "beta", args_for("beta", 1, table).join(address));
  const std::string said = "no answer from " + address +
                           " (cannot connect; retrying): is the site running and "
                           "listening there?";
  const bool told = waiting_line_says(beta, said);
  INFO(beta.log());
  REQUIRE(told);
  CHECK_FALSE(beta.exited());
  CHECK(contains(beta.log(), "joining: " + said));  // the warning at once
  // Nothing is measured before training: status says so instead of showing zeros.
  const auto status = meridian::tests::run_meridian("status --socket " + (beta.run_dir() / "control.sock").string());
  INFO(status.output);
  CHECK(status.exit_code == 0);
  CHECK(contains(status.output, "beta (sgp), joining"));
  CHECK(contains(status.output, "loss        not measured yet"));
  CHECK(contains(status.output, "throughput  not measured yet"));
  beta.signal(SIGINT);
  CHECK(beta.wait_exit() == 0);
}

TEST_CASE("a joiner whose key the other site's roster lacks hears that its key is refused", "[daemon][join][process]") {
  TempDir dir;
  const auto table = meridian::tests::write_small_table(dir.path(), "t.csv", {"dog", "cat"});
  const auto keys = make_keys(dir.path(), {"alpha", "beta"});
  // alpha's roster leaves beta out; beta's lists both, so beta knows alpha's key and dials it.
  const auto alpha_roster = write_roster(dir.path() / "alpha-roster.txt", keys, {"alpha"});
  const auto beta_roster = write_roster(dir.path() / "beta-roster.txt", keys, {"alpha", "beta"});
  SiteProcess alpha(dir.path() / "alpha", args_for("alpha", 0, table).secure(dir.path() / "keys-alpha", alpha_roster));
  const auto endpoint = alpha.endpoint();
  REQUIRE_FALSE(endpoint.empty());
  SiteProcess beta(dir.path() / "beta",
                   args_for("beta", 1, table).secure(dir.path() / "keys-beta", beta_roster).join("alpha@" + endpoint));
  const std::string said = "alpha (" + endpoint +
                           ") refused this site's key (CURVE handshake denied, ZAP status 400): is this site's "
                           "public key in that site's roster?";
  const bool told = waiting_line_says(beta, said);
  INFO("beta:\n" << beta.log() << "\nalpha:\n" << alpha.log());
  REQUIRE(told);
  CHECK(contains(beta.log(), "joining: " + said));
  for (auto* site : {&beta, &alpha}) {
    site->signal(SIGINT);
    CHECK(site->wait_exit() == 0);
  }
}

TEST_CASE("a joiner without CURVE at a secure site hears that CurveZMQ is wanted", "[daemon][join][process]") {
  TempDir dir;
  const auto table = meridian::tests::write_small_table(dir.path(), "t.csv", {"dog", "cat"});
  const auto keys = make_keys(dir.path(), {"alpha"});
  const auto roster = write_roster(dir.path() / "roster.txt", keys, {"alpha"});
  SiteProcess alpha(dir.path() / "alpha", args_for("alpha", 0, table).secure(dir.path() / "keys-alpha", roster));
  const auto endpoint = alpha.endpoint();
  REQUIRE_FALSE(endpoint.empty());
  SiteProcess beta(dir.path() / "beta", args_for("beta", 1, table).join(endpoint));
  // Either the mechanisms differ, or (mostly) the secure site closed the connection before its
  // greeting arrived: both say CurveZMQ is wanted and this site runs --insecure.
  const std::string said = "this site runs --insecure";
  const bool told = waiting_line_says(beta, said);
  INFO("beta:\n" << beta.log() << "\nalpha:\n" << alpha.log());
  REQUIRE(told);
  for (auto* site : {&beta, &alpha}) {
    site->signal(SIGINT);
    CHECK(site->wait_exit() == 0);
  }
}
