// Roster changes without restarts, through real `meridian start` processes with CurveZMQ on
// 127.0.0.1: a site whose key no running site lists is refused; `meridian roster add` at one site and
// an edited file with SIGHUP at the other let it join when it starts again, the running sites never
// restarting; `meridian roster remove` at
// both takes it out again: it leaves their views and federation view, its new connections are refused
// (ZAP), and the others carry on training.
#include <catch2/catch.hpp>

#include <signal.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "daemon/control/control_client.h"
#include "error/exit_code.h"
#include "tests/daemon/federation_process_support.h"
#include "tests/daemon/http_get.h"
#include "tests/daemon/site_process.h"
#include "tests/support/file_contents.h"
#include "tests/support/meridian_command.h"
#include "tests/support/temp_dir.h"

namespace fs = std::filesystem;
using meridian::daemon::ControlClient;
using meridian::tests::eventually_from_process;
using meridian::tests::SiteProcess;
using meridian::tests::TempDir;

namespace {

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

std::string socket_of(const SiteProcess& site) { return (site.run_dir() / "control.sock").string(); }

// Live members in the site's view, or -1 while its control socket does not answer.
int peers_alive(const SiteProcess& site) {
  try {
    return ControlClient(socket_of(site)).status().peers_alive;
  } catch (const std::exception&) {
    return -1;
  }
}

std::vector<std::string> federation_sites(const SiteProcess& site) {
  std::vector<std::string> names;
  try {
    for (const auto& r : ControlClient(socket_of(site)).federation()) names.push_back(r.site);
  } catch (const std::exception&) {
  }
  return names;
}

// meridian_zap_denied_total of the site's /metrics, or -1 when it cannot be read.
double zap_denied(const SiteProcess& site) {
  const int port = meridian::tests::metrics_port(site.log());
  if (port == 0) return -1;
  const auto body = meridian::tests::http_body(meridian::tests::http_get(port, "/metrics"));
  const std::string name = "\nmeridian_zap_denied_total ";
  const auto at = body.find(name);
  return at == std::string::npos ? -1 : std::stod(body.substr(at + name.size()));
}

}  // namespace

TEST_CASE("a site is added to and removed from running sites' rosters, nobody restarting",
          "[daemon][roster][process]") {
  TempDir dir;
  const auto table = meridian::tests::write_small_table(dir.path());
  const meridian::tests::SiteKeys keys(dir.path(), {"alpha", "beta", "gamma"});
  // Each site reads its own copy of the roster, as each member of a consortium keeps its own.
  for (const std::string name : {"alpha", "beta"})
    std::ofstream(dir.path() / (name + "-roster.txt")) << keys.roster({"alpha", "beta"});
  std::ofstream(dir.path() / "gamma-roster.txt") << keys.roster({"alpha", "beta", "gamma"});
  auto args = [&](const std::string& name, int index) {
    return meridian::tests::training_site_args(name, index, 3, table)
        .secure(dir.path() / ("keys-" + name), dir.path() / (name + "-roster.txt"))
        .set("--min-sites", 2);
  };
  SiteProcess alpha(dir.path() / "alpha", args("alpha", 0));
  const std::string join_alpha = "alpha@" + alpha.endpoint();
  SiteProcess beta(dir.path() / "beta", args("beta", 1).join(join_alpha));
  INFO("alpha:\n" << alpha.log() << "\nbeta:\n" << beta.log());
  REQUIRE(eventually_from_process([&] { return (peers_alive(alpha) == 2 && peers_alive(beta) == 2) || alpha.exited(); }));

  // gamma lists everybody, but no running site lists gamma: its handshake is refused.
  const auto gamma_args = args("gamma", 2).join(join_alpha);
  {
    SiteProcess early(dir.path() / "gamma-early", gamma_args);
    REQUIRE(eventually_from_process([&] { return zap_denied(alpha) > 0; }));
    CHECK(peers_alive(alpha) == 2);
    early.signal(SIGINT);
    early.wait_exit();
  }

  // alpha: `meridian roster add`; beta: its file edited by hand, then SIGHUP.
  const auto gamma_line = "gamma " + keys.of.at("gamma").public_key;
  const auto added = meridian::tests::run_meridian("roster add gamma '" + keys.of.at("gamma").public_key +
                                                   "' --socket " + socket_of(alpha));
  INFO(added.output);
  CHECK(added.exit_code == 0);
  CHECK(contains(added.output, "added gamma"));
  CHECK(contains(added.output, "3 sites in force: alpha, beta, gamma"));
  const auto alpha_roster = meridian::tests::file_contents(dir.path() / "alpha-roster.txt");
  CHECK(contains(alpha_roster, "# test federation\n"));
  CHECK(contains(alpha_roster, gamma_line + "\n"));
  std::ofstream(dir.path() / "beta-roster.txt", std::ios::app) << gamma_line << "\n";
  beta.signal(SIGHUP);
  REQUIRE(eventually_from_process([&] { return contains(beta.log(), "SIGHUP: roster ") || beta.exited(); }));
  CHECK(contains(beta.log(), "beta-roster.txt reloaded: added gamma"));

  // gamma, started again, joins; alpha and beta run on.
  SiteProcess gamma(dir.path() / "gamma", gamma_args);
  REQUIRE(eventually_from_process([&] { return (peers_alive(alpha) == 3 && peers_alive(beta) == 3) || gamma.exited(); }));
  INFO("gamma:\n" << gamma.log());
  REQUIRE(eventually_from_process([&] { return federation_sites(alpha) == std::vector<std::string>{"alpha", "beta", "gamma"}; }));
  const auto listed = meridian::tests::run_meridian("roster list --socket " + socket_of(beta));
  CHECK(listed.exit_code == 0);
  CHECK(contains(listed.output, "gamma"));

  // Refused changes name the problem and change nothing.
  const auto self = meridian::tests::run_meridian("roster remove alpha --socket " + socket_of(alpha));
  CHECK(self.exit_code == meridian::error::kExitUser);
  CHECK(contains(self.output, "'alpha' is this site: it cannot remove itself from its own roster"));
  const auto unknown = meridian::tests::run_meridian("roster remove delta --socket " + socket_of(alpha));
  CHECK(unknown.exit_code == meridian::error::kExitUser);
  CHECK(contains(unknown.output, "site 'delta' is not in roster "));
  CHECK(contains(unknown.output, "(it lists: alpha, beta, gamma)"));
  const auto twice = meridian::tests::run_meridian("roster add gamma '" + keys.of.at("gamma").public_key +
                                                   "' --socket " + socket_of(alpha));
  CHECK(twice.exit_code == meridian::error::kExitUser);
  CHECK(contains(twice.output, "site 'gamma' is already in roster "));

  // Out again at both sites: gamma leaves their views and their federation view at once.
  for (const auto* site : {&alpha, &beta}) {
    const auto removed = meridian::tests::run_meridian("roster remove gamma --socket " + socket_of(*site));
    INFO(removed.output);
    CHECK(removed.exit_code == 0);
    CHECK(contains(removed.output, "removed gamma"));
  }
  CHECK_FALSE(contains(meridian::tests::file_contents(dir.path() / "alpha-roster.txt"), "gamma"));
  CHECK(contains(meridian::tests::file_contents(dir.path() / "alpha-roster.txt"), "# test federation\n"));
  const double denied = zap_denied(alpha);
  REQUIRE(eventually_from_process([&] { return peers_alive(alpha) == 2 && peers_alive(beta) == 2; }));
  REQUIRE(eventually_from_process([&] { return federation_sites(alpha) == std::vector<std::string>{"alpha", "beta"}; }));
  bool gamma_left = false;
  for (const auto& p : ControlClient(socket_of(alpha)).peers())
    if (p.name == "gamma") gamma_left = p.state == "left";
  CHECK(gamma_left);
  CHECK(contains(alpha.log(), "'gamma' is no longer in the roster: its key is refused from now on"));
  // gamma, hearing nothing, connects anew, and its key is refused.
  CHECK(eventually_from_process([&] { return zap_denied(alpha) > denied; }));

  // alpha and beta carry on training without it.
  const auto step = ControlClient(socket_of(alpha)).status().step;
  CHECK(eventually_from_process([&] {
    try {
      return ControlClient(socket_of(alpha)).status().step > step + 20;
    } catch (const std::exception&) {
      return false;
    }
  }));
  for (auto* site : {&gamma, &beta, &alpha}) site->signal(SIGINT);
  CHECK(alpha.wait_exit() == 0);
  CHECK(beta.wait_exit() == 0);
  gamma.wait_exit();
}
