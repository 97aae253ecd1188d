// --secure-aggregation through real `meridian start` processes on 127.0.0.1 with CurveZMQ keys: the
// algorithms whose rounds take an exact mean train with masked shares only; a SIGKILLed site's round
// is redone by the survivors with fresh masks and no unmasked share ever arrives; a site without it
// is refused at join with both values named; sgp refuses it at the configuration check.
#include <catch2/catch.hpp>

#include <signal.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "error/exit_code.h"
#include "tests/daemon/federation_process_support.h"
#include "tests/daemon/http_get.h"
#include "tests/daemon/site_process.h"
#include "tests/support/temp_dir.h"

namespace fs = std::filesystem;
using meridian::tests::eventually_from_process;
using meridian::tests::SiteKeys;
using meridian::tests::SiteProcess;
using meridian::tests::TempDir;

namespace {

// The value of the series `series` (name with its labels) on a site's /metrics; -1 when absent.
double metric(int port, const std::string& series) {
  const auto body = meridian::tests::http_body(meridian::tests::http_get(port, "/metrics"));
  std::istringstream lines(body);
  for (std::string line; std::getline(lines, line);)
    if (line.rfind(series + " ", 0) == 0) return std::stod(line.substr(series.size() + 1));
  return -1;
}

std::string secure_event(const std::string& event) {
  return "meridian_secure_aggregation_total{event=\"" + event + "\"}";
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// `count` secure sites training `algo` on a small table, each with its metrics on a free port.
struct SecureFederation {
  TempDir dir;
  std::vector<std::string> names;
  std::vector<std::unique_ptr<SiteProcess>> sites;
  std::vector<int> ports;

  SecureFederation(int count, const std::string& algo, int epochs, const std::vector<std::string>& extra = {}) {
    for (int i = 0; i < count; ++i) names.push_back("s" + std::to_string(i));
    const auto table = meridian::tests::write_small_table(dir.path());
    const SiteKeys keys(dir.path(), names);
    std::ofstream(dir.path() / "roster.txt") << keys.roster(names);
    for (int i = 0; i < count; ++i) {
      auto args = meridian::tests::training_site_args(names[i], i, count, table)
                      .secure(dir.path() / ("keys-" + names[i]), dir.path() / "roster.txt")
                      .set("--algo", algo)
                      .set("--epochs", epochs)
                      .on("--secure-aggregation");
      for (std::size_t e = 0; e + 1 < extra.size(); e += 2) args.set(extra[e], extra[e + 1]);
      if (i > 0) args.join(names[0] + "@" + sites[0]->endpoint());
      sites.push_back(std::make_unique<SiteProcess>(dir.path() / names[i], args));
    }
    for (auto& s : sites) {
      REQUIRE(eventually_from_process([&] { return meridian::tests::metrics_port(s->log()) != 0 || s->exited(); }));
      ports.push_back(meridian::tests::metrics_port(s->log()));
    }
  }

  std::string logs() const {
    std::string out;
    for (std::size_t i = 0; i < sites.size(); ++i) out += names[i] + ":\n" + sites[i]->log() + "\n";
    return out;
  }
};

}  // namespace

TEST_CASE("allreduce, dts, dsync and diloco train with masked shares only", "[daemon][privacy][process]") {
  const std::string algo = GENERATE(as<std::string>{}, "allreduce", "dts", "dsync", "diloco");
  INFO(algo);
  // 96 rows, 4 sites, batch 8: 3 steps an epoch.
  // dts and diloco mix every second step (diloco: two inner steps per outer sync).
  const std::vector<std::string> shape = algo == "dts"      ? std::vector<std::string>{"--period", "2"}
                                         : algo == "diloco" ? std::vector<std::string>{"--inner-steps", "2"}
                                                            : std::vector<std::string>{};
  SecureFederation fed(4, algo, 8, shape);
  for (auto& s : fed.sites) CHECK(s->wait_exit(std::chrono::seconds(300)) == 0);
  INFO(fed.logs());
  // Each site's closing totals: it sent masked shares and was sent nothing unmasked or malformed.
  const std::regex totals(
      "secure aggregation: ([0-9]+) masked shares sent; refused ([0-9]+) malformed, [0-9]+ stale, "
      "([0-9]+) unmasked");
  for (auto& s : fed.sites) {
    REQUIRE(s->has_result());
    const auto log = s->log();
    std::smatch m;
    REQUIRE(std::regex_search(log, m, totals));
    CHECK(std::stoi(m[1]) > 0);
    CHECK(std::stoi(m[2]) == 0);
    CHECK(std::stoi(m[3]) == 0);
  }
}

TEST_CASE("a SIGKILLed site's secure round is redone in the next view and nothing unmasked arrives",
          "[daemon][privacy][faults][process]") {
  SecureFederation fed(4, "allreduce", 100000, {"--round-timeout", "3"});
  INFO(fed.logs());
  for (int p : fed.ports) REQUIRE(p != 0);
  // Training is under way on every site: masked shares go out.
  REQUIRE(eventually_from_process([&] {
    for (int p : fed.ports)
      if (metric(p, secure_event("shares_sent")) < 30) return false;
    return true;
  }));
  fed.sites[3]->kill_hard();
  // The survivors abandon the round the dead site was in and redo it in the view without it, then
  // train on: their shares keep going out.
  std::vector<double> sent_after_kill;
  for (int i = 0; i < 3; ++i) {
    CHECK(eventually_from_process([&] { return metric(fed.ports[i], secure_event("rounds_abandoned")) >= 1; }));
    sent_after_kill.push_back(metric(fed.ports[i], secure_event("shares_sent")));
  }
  for (int i = 0; i < 3; ++i) {
    CHECK(eventually_from_process([&] { return metric(fed.ports[i], secure_event("shares_sent")) >= sent_after_kill[i] + 20; }));
    // No float share ever reached a survivor, and none of the masked ones was malformed.
    CHECK(metric(fed.ports[i], secure_event("refused_unmasked")) == 0);
    CHECK(metric(fed.ports[i], secure_event("refused_malformed")) == 0);
  }
  for (int i = 0; i < 3; ++i) fed.sites[i]->signal(SIGINT);
  for (int i = 0; i < 3; ++i) CHECK(fed.sites[i]->wait_exit() == 0);
}

TEST_CASE("a site without --secure-aggregation is refused at join, with both values named",
          "[daemon][privacy][join][process]") {
  TempDir dir;
  const std::vector<std::string> names = {"alpha", "beta"};
  const auto table = meridian::tests::write_small_table(dir.path());
  const SiteKeys keys(dir.path(), names);
  std::ofstream(dir.path() / "roster.txt") << keys.roster(names);
  auto args = [&](const std::string& name, int index) {
    return meridian::tests::training_site_args(name, index, 2, table)
        .secure(dir.path() / ("keys-" + name), dir.path() / "roster.txt")
        .set("--algo", "allreduce");
  };
  SiteProcess alpha(dir.path() / "alpha", args("alpha", 0).on("--secure-aggregation"));
  const std::string endpoint = alpha.endpoint();
  REQUIRE_FALSE(endpoint.empty());
  SiteProcess beta(dir.path() / "beta", args("beta", 1).join("alpha@" + endpoint));
  const int beta_exit = beta.wait_exit(std::chrono::seconds(300));
  INFO("alpha:\n" << alpha.log() << "\nbeta:\n" << beta.log());
  CHECK(beta_exit == meridian::error::kExitUser);
  CHECK(contains(beta.log(),
                 "alpha refuses this site: secure-aggregation differs (alpha: on (48-bit masks, 6-byte lanes on the "
                 "wire); this site: off)"));
  REQUIRE(eventually_from_process([&] { return contains(alpha.log(), "refused at join") || alpha.exited(); }));
  CHECK(contains(alpha.log(),
                 "refused at join: secure-aggregation differs (this site: on (48-bit masks, 6-byte lanes on the wire); "
                 "beta: off)"));
  alpha.signal(SIGINT);
  CHECK(alpha.wait_exit() == 0);
}

TEST_CASE("sgp and diloco-gossip refuse --secure-aggregation, naming the algorithms that support it",
          "[daemon][privacy][config][process]") {
  const std::string algo = GENERATE(as<std::string>{}, "sgp", "diloco-gossip");
  TempDir dir;
  const auto table = meridian::tests::write_small_table(dir.path());
  const SiteKeys keys(dir.path(), {"x"});
  std::ofstream(dir.path() / "roster.txt") << keys.roster({"x"});
  SiteProcess site(dir.path() / "x", meridian::tests::training_site_args("x", 0, 1, table)
                                         .secure(dir.path() / "keys-x", dir.path() / "roster.txt")
                                         .set("--algo", algo)
                                         .on("--secure-aggregation"));
  CHECK(site.wait_exit() != 0);
  INFO(site.log());
  CHECK(contains(site.log(),
                 "--secure-aggregation: applies to allreduce, dts, dsync and diloco only, whose rounds "
                 "take an exact mean (this site runs " +
                     algo + ")"));
}
