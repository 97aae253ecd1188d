// A rostered member turned hostile against a real federation: three `meridian start` processes with
// CurveZMQ on 127.0.0.1 train together while this test, holding a fourth rostered key (and later a
// stolen one), speaks the wire protocol to them (tests/peer/hostile_peer.h). It announces addresses no
// site may dial (one libzmq cannot parse, another transport), gossips member records carrying them,
// and, after a key rotation done as docs/deploy.md says, speaks with the replaced key. Every attack is
// refused and counted on the sites' /metrics, no site exits, no view loses an honest site, and the
// federation goes on training with the new key.
#include <catch2/catch.hpp>

#include <signal.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "daemon/control/control_client.h"
#include "peer/curve_keys.h"
#include "peer/membership_messages.h"
#include "tests/daemon/federation_process_support.h"
#include "tests/daemon/http_get.h"
#include "tests/daemon/site_process.h"
#include "tests/peer/hostile_peer.h"
#include "tests/support/meridian_command.h"
#include "tests/support/temp_dir.h"

namespace fs = std::filesystem;
using meridian::daemon::ControlClient;
using meridian::tests::eventually_from_process;
using meridian::tests::HostilePeer;
using meridian::tests::SiteProcess;
using meridian::tests::TempDir;
using namespace meridian::peer;

namespace {

std::string socket_of(const SiteProcess& site) { return (site.run_dir() / "control.sock").string(); }

// Live members in the site's view, or -1 while its control socket does not answer.
int peers_alive(const SiteProcess& site) {
  try {
    return ControlClient(socket_of(site)).status().peers_alive;
  } catch (const std::exception&) {
    return -1;
  }
}

std::uint64_t step_of(const SiteProcess& site) {
  try {
    return ControlClient(socket_of(site)).status().step;
  } catch (const std::exception&) {
    return 0;
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

// A counter of the site's /metrics ("meridian_zap_denied_total", or a rejection cause such as
// "address"), 0 when absent, -1 when /metrics cannot be read.
double counter(const SiteProcess& site, const std::string& name) {
  const int port = meridian::tests::metrics_port(site.log());
  if (port == 0) return -1;
  const auto body = meridian::tests::http_body(meridian::tests::http_get(port, "/metrics"));
  if (body.empty()) return -1;
  const std::string metric =
      name.rfind("meridian_", 0) == 0 ? name : "meridian_rejected_messages_total{cause=\"" + name + "\"}";
  const auto at = body.find("\n" + metric + " ");
  return at == std::string::npos ? 0 : std::stod(body.substr(at + metric.size() + 2));
}

HelloInfo hello_of(const std::string& name, const std::string& address) {
  HelloInfo h;
  h.name = name;
  h.listen_address = address;
  h.incarnation = 1;
  return h;
}

}  // namespace

TEST_CASE("a hostile rostered member cannot stop, redirect or outlive a key rotation in a live federation",
          "[peer][hostile][security][process]") {
  TempDir dir;
  const auto table = meridian::tests::write_small_table(dir.path());
  const std::vector<std::string> honest{"alpha", "beta", "gamma"};
  const meridian::tests::SiteKeys keys(dir.path(), {"alpha", "beta", "gamma", "mallory"});
  // Each site reads its own copy of the roster, as each member of a consortium keeps its own.
  for (const auto& name : honest)
    std::ofstream(dir.path() / (name + "-roster.txt")) << keys.roster({"alpha", "beta", "gamma", "mallory"});
  auto args = [&](const std::string& name, int index, const fs::path& key_dir) {
    return meridian::tests::training_site_args(name, index, 3, table)
        .secure(key_dir, dir.path() / (name + "-roster.txt"))
        .set("--min-sites", 2)
        .set("--epochs", 100000000);  // trains on until stopped, however long the rotation takes
  };
  SiteProcess alpha(dir.path() / "alpha", args("alpha", 0, dir.path() / "keys-alpha"));
  const std::string join_alpha = "alpha@" + alpha.endpoint();
  auto beta = std::make_unique<SiteProcess>(dir.path() / "beta",
                                            args("beta", 1, dir.path() / "keys-beta").join(join_alpha));
  SiteProcess gamma(dir.path() / "gamma", args("gamma", 2, dir.path() / "keys-gamma").join(join_alpha));
  // The sites' logs so far, for a failed expectation.
  auto logs = [&] { return "alpha:\n" + alpha.log() + "\nbeta:\n" + beta->log() + "\ngamma:\n" + gamma.log(); };
  auto all_alive = [&] {
    return peers_alive(alpha) == 3 && peers_alive(*beta) == 3 && peers_alive(gamma) == 3;
  };
  REQUIRE(eventually_from_process([&] { return all_alive() || alpha.exited() || beta->exited() || gamma.exited(); }));
  REQUIRE(all_alive());

  // mallory, rostered everywhere, talks to alpha. It learns alpha's model fingerprint from alpha's
  // refusal of a hello with other terms, so that what it sends next passes the fingerprint check.
  HostilePeer mallory(keys.of.at("mallory"), alpha.endpoint(), keys.of.at("alpha").public_key);
  REQUIRE(mallory.learn_fingerprint("mallory"));
  // (The daemon refreshes its /metrics counters from the transport's every so often: hence eventually.)
  CHECK(eventually_from_process([&] { return counter(alpha, "terms") > 0; }));

  // Addresses no site may dial: one libzmq cannot parse (which used to stop the transport), another
  // transport, a local socket.
  for (const std::string bad : {"tcp://nohost", "ipc://x", "inproc://zeromq.zap.01"})
    mallory.send_hello(hello_of("mallory", bad));
  REQUIRE(eventually_from_process([&] { return counter(alpha, "address") >= 3; }));

  // Gossip that would send alpha to dial beta and gamma elsewhere: refused as a whole.
  const double malformed = counter(alpha, "malformed");
  MemberListInfo gossip;
  gossip.members = {{"beta", "tcp://nohost", "", 1ull << 40, MemberState::kAlive},
                    {"gamma", "ipc:///tmp/gamma", "", 1ull << 40, MemberState::kAlive}};
  mallory.send_members(gossip);
  REQUIRE(eventually_from_process([&] { return counter(alpha, "malformed") > malformed; }));

  // Every site still runs and still sees every honest site.
  CHECK_FALSE(alpha.exited());
  REQUIRE(eventually_from_process(all_alive));
  CHECK(federation_sites(alpha) == honest);

  // beta's secret key is stolen: the thief connects as beta, admitted while the key is listed.
  HostilePeer thief(keys.of.at("beta"), alpha.endpoint(), keys.of.at("alpha").public_key);
  thief.send_heartbeat(HeartbeatInfo{});
  REQUIRE(eventually_from_process([&] { return thief.events().handshakes_ok > 0; }));

  // The rotation of docs/deploy.md: beta makes a new key pair; every other site puts the new key in
  // its roster file and reloads it (alpha with `meridian roster reload`, gamma with SIGHUP); beta
  // restarts with its new key and the new roster.
  const auto fresh = generate_curve_key_pair();
  write_key_pair(fresh, dir.path() / "keys-beta-new");
  const std::string old_line = "beta " + keys.of.at("beta").public_key;
  for (const auto& name : honest) {
    const auto file = dir.path() / (name + "-roster.txt");
    std::string text = meridian::tests::file_contents(file);
    text.replace(text.find(old_line), old_line.size(), "beta " + fresh.public_key);
    std::ofstream(file) << text;
  }
  const double denied_before = counter(alpha, "meridian_zap_denied_total");
  const auto reloaded = meridian::tests::run_meridian("roster reload --socket " + socket_of(alpha));
  INFO(reloaded.output);
  CHECK(reloaded.exit_code == 0);
  CHECK(reloaded.output.find("new key for beta") != std::string::npos);
  gamma.signal(SIGHUP);
  REQUIRE(eventually_from_process([&] { return gamma.log().find("SIGHUP: roster ") != std::string::npos; }));
  beta->signal(SIGINT);
  beta->wait_exit();

  // The old key is cut: the thief's connection closes, what it sends is refused and counted (by key
  // on a connection not yet closed, at the handshake on a new one).
  REQUIRE(eventually_from_process([&] { return thief.events().closed > 0; }));
  thief.send_heartbeat(HeartbeatInfo{});
  CHECK(eventually_from_process([&] { return counter(alpha, "meridian_zap_denied_total") > denied_before; }));
  CHECK(thief.events().handshakes_ok == 1);

  // beta, restarted with its new key, is back in every view, and the federation trains on.
  beta = std::make_unique<SiteProcess>(dir.path() / "beta-new",
                                       args("beta", 1, dir.path() / "keys-beta-new").join(join_alpha));
  REQUIRE(eventually_from_process([&] { return all_alive() || beta->exited(); }));
  REQUIRE(all_alive());
  const bool rejoined = eventually_from_process([&] { return federation_sites(alpha) == honest; });
  INFO(logs());
  REQUIRE(rejoined);
  const auto step = step_of(alpha);
  CHECK(eventually_from_process([&] { return step_of(alpha) > step + 20 || alpha.exited(); }));
  CHECK(step_of(alpha) > step + 20);

  // The stolen key still gets nothing through.
  const double denied_late = counter(alpha, "meridian_zap_denied_total");
  HostilePeer late_thief(keys.of.at("beta"), alpha.endpoint(), keys.of.at("alpha").public_key);
  late_thief.send_heartbeat(HeartbeatInfo{});
  CHECK(eventually_from_process([&] {
    return late_thief.events().handshakes_denied > 0 || counter(alpha, "meridian_zap_denied_total") > denied_late;
  }));
  CHECK(late_thief.events().handshakes_ok == 0);

  for (auto* site : {&gamma, beta.get(), &alpha}) site->signal(SIGINT);
  CHECK(alpha.wait_exit() == 0);
  CHECK(beta->wait_exit() == 0);
  CHECK(gamma.wait_exit() == 0);
}
