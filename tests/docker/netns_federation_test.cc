// The compose federation without Docker: the four sites of docker/sites/*.toml (the files compose.yml
// mounts) each in its own network namespace at the address compose gives its container, joined by veth
// pairs to a bridge in a hub namespace, with keys and roster from docker/make-federation and CURVE on.
// Traffic stays inside these namespaces: nothing is added to the host's interfaces (checked below).
// Skipped, with the reason, where namespaces cannot be created (not root, no CAP_NET_ADMIN).
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <set>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "daemon/control/control_client.h"
#include "tests/support/temp_dir.h"
#include "tests/docker/federation_sites.h"
#include "tests/docker/namespace_network.h"
#include "tests/peer/node_process.h"
#include "tests/support/build_paths.h"
#include "tests/support/child_process.h"
#include "tests/support/fashion_mnist.h"

using meridian::tests::FederationSite;
using meridian::tests::NamespaceNetwork;
using meridian::tests::NodeProcess;
using meridian::tests::run_command;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

const fs::path kSource = meridian::tests::source_dir();

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ",") + n;
  return out;
}

// One running federation: namespaces, key material and one process per site. Members are destroyed in
// reverse order, so the processes are killed before their namespaces are deleted.
struct NamespaceFederation {
  std::vector<FederationSite> sites = meridian::tests::load_federation_sites();
  meridian::tests::TempDir dir;
  NamespaceNetwork net;
  std::vector<std::string> namespaces;
  std::vector<std::unique_ptr<NodeProcess>> nodes;

  NamespaceFederation() {
    // The same script a Docker user runs first, so the test covers it: keys, roster with the sites'
    // listen addresses.
    const auto r = run_command({"env", std::string("MERIDIAN=") + meridian::tests::meridian_binary(),
                                (kSource / "docker" / "make-federation").string(), federation().string()});
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    for (const auto& s : sites) namespaces.push_back(net.add_site(s.config.name, s.host + "/24"));
  }

  fs::path federation() const { return dir.path() / "federation"; }
  fs::path log(std::size_t i) const { return dir.path() / (sites[i].config.name + ".log"); }

  // A bare site (transport and membership only) with the site file's identity and network settings.
  void start_peer_node(std::size_t i) {
    const auto& c = sites[i].config;
    auto argv = NamespaceNetwork::exec_in(namespaces[i]);
    argv.insert(argv.end(), {meridian::tests::meridian_binary(), "peer-node", "--name", c.name, "--listen", c.listen,
                             "--keys", (federation() / c.name / "keys").string(), "--roster",
                             (federation() / "roster.txt").string(), "--region", c.region, "--wan", c.wan});
    for (const auto& peer : c.join) argv.insert(argv.end(), {"--bootstrap", peer});
    nodes.push_back(std::make_unique<NodeProcess>(argv, log(i).string()));
  }

  fs::path run_dir(std::size_t i) const { return federation() / sites[i].config.name / "run"; }

  // The daemon as its container starts it: docker/entrypoint.sh with the image's environment pointing
  // at this site's key pair, the roster, its run directory and its site file. `extra` are flags
  // appended to the container's `start` (the dataset's path on this machine, a shorter run).
  void start_site(std::size_t i, const std::vector<std::string>& extra) {
    const auto& c = sites[i].config;
    auto argv = NamespaceNetwork::exec_in(namespaces[i]);
    const auto bin_dir = fs::path(meridian::tests::meridian_binary()).parent_path().string();
    argv.insert(argv.end(), {"env", "PATH=" + bin_dir + ":/usr/sbin:/usr/bin:/sbin:/bin",
                             "MERIDIAN_KEY_DIR=" + (federation() / c.name / "keys").string(),
                             "MERIDIAN_ROSTER=" + (federation() / "roster.txt").string(),
                             "MERIDIAN_RUN_DIR=" + run_dir(i).string(), "MERIDIAN_CONFIG=" + sites[i].file.string(),
                             (kSource / "docker" / "entrypoint.sh").string(), "start"});
    argv.insert(argv.end(), extra.begin(), extra.end());
    nodes.push_back(std::make_unique<NodeProcess>(argv, log(i).string()));
  }

  std::string logs() const {
    std::ostringstream out;
    for (std::size_t i = 0; i < sites.size(); ++i) {
      std::ifstream in(log(i));
      out << "--- " << sites[i].config.name << " (stderr)\n" << in.rdbuf() << "\n";
    }
    return out.str();
  }

  // Waits until each of `who` reports exactly `expected` as live members and all report the same newest
  // view holding them. The bound is a hang guard only.
  bool agree(const std::vector<std::size_t>& who, const std::vector<std::string>& expected) {
    const auto deadline = std::chrono::steady_clock::now() + 60s;
    while (std::chrono::steady_clock::now() < deadline) {
      bool ok = true;
      std::string first_view;
      for (auto i : who) {
        const auto view = nodes[i]->latest("view ");
        ok = ok && nodes[i]->latest("members ") == "members " + joined(expected) &&
             view.size() > joined(expected).size() &&
             view.compare(view.size() - joined(expected).size(), std::string::npos, joined(expected)) == 0;
        if (first_view.empty()) first_view = view;
        ok = ok && view == first_view;
      }
      if (ok) return true;
      std::this_thread::sleep_for(50ms);
    }
    return false;
  }
};

}  // namespace

TEST_CASE("the compose sites agree on their members across network namespaces with CURVE and world4",
          "[docker][netns][process]") {
  if (const auto reason = NamespaceNetwork::unavailable_reason()) {
    WARN("SKIPPED: cannot create network namespaces here: " << *reason);
    return;
  }
  NamespaceFederation fed;
  REQUIRE(fed.sites.size() == 4);

  // Nothing of the test network is visible in the host's namespace.
  const auto host_links = run_command({"ip", "-o", "link", "show"}).output;
  CHECK(host_links.find(fed.net.prefix()) == std::string::npos);
  const auto host_addresses = run_command({"ip", "-o", "addr", "show"}).output;
  for (const auto& s : fed.sites) CHECK(host_addresses.find(" " + s.host + "/") == std::string::npos);
  // Each site sees only its own address and loopback.
  for (std::size_t i = 0; i < fed.sites.size(); ++i) {
    auto argv = NamespaceNetwork::exec_in(fed.namespaces[i]);
    argv.insert(argv.end(), {"ip", "-o", "-4", "addr", "show"});
    const auto addresses = run_command(argv).output;
    CHECK(addresses.find(" " + fed.sites[i].host + "/24") != std::string::npos);
    CHECK(std::count(addresses.begin(), addresses.end(), '\n') == 2);
  }

  for (std::size_t i = 0; i < fed.sites.size(); ++i) fed.start_peer_node(i);
  for (std::size_t i = 0; i < fed.sites.size(); ++i) {
    const auto endpoint = fed.nodes[i]->wait_prefix("endpoint ");
    if (endpoint.empty()) FAIL("site " << fed.sites[i].config.name << " did not start\n" << fed.logs());
    CHECK(endpoint == "endpoint " + fed.sites[i].config.listen);
  }

  std::vector<std::string> names;
  for (const auto& s : fed.sites) names.push_back(s.config.name);
  std::sort(names.begin(), names.end());
  if (!fed.agree({0, 1, 2, 3}, names)) FAIL("the four sites did not agree on their members\n" << fed.logs());
  for (auto& node : fed.nodes) CHECK(node->latest("rejected ").empty());

  // A machine on the same network with a key pair that is not in the federation's roster: it knows
  // the sites' keys and addresses (its roster lists them and itself), but their CURVE handshake refuses
  // it, so it never becomes a member anywhere.
  const auto intruder_host = fed.sites[0].host.substr(0, fed.sites[0].host.rfind('.')) + ".99";
  const auto intruder_ns = fed.net.add_site("intruder", intruder_host + "/24");
  const auto intruder_keys = fed.dir.path() / "intruder-keys";
  const auto keygen = run_command({meridian::tests::meridian_binary(), "keygen", "--out", intruder_keys.string()});
  REQUIRE(keygen.exit_code == 0);
  const auto intruder_roster = fed.dir.path() / "intruder-roster.txt";
  {
    std::ifstream federation_roster(fed.federation() / "roster.txt");
    std::ofstream out(intruder_roster);
    out << federation_roster.rdbuf() << "intruder " << keygen.output.substr(0, keygen.output.find('\n')) << "\n";
  }
  auto intruder_argv = NamespaceNetwork::exec_in(intruder_ns);
  intruder_argv.insert(intruder_argv.end(),
                       {meridian::tests::meridian_binary(), "peer-node", "--name", "intruder", "--keys",
                        intruder_keys.string(), "--roster", intruder_roster.string(), "--listen",
                        "tcp://" + intruder_host + ":7400", "--bootstrap", fed.sites[0].config.listen});
  NodeProcess intruder(intruder_argv, (fed.dir.path() / "intruder.log").string());
  if (fed.nodes[0]->wait_prefix("zap-denied ").empty())
    FAIL("oregon never refused the intruder's handshake\n" << fed.logs());
  CHECK(intruder.wait_prefix("members ") == "members intruder");
  CHECK(intruder.latest("members ") == "members intruder");
  for (auto& node : fed.nodes) CHECK(node->latest("members ") == "members " + joined(names));

  // Tokyo leaves gracefully; the others see it at once and agree on the three that remain.
  fed.nodes[3]->write_line("leave");
  CHECK(fed.nodes[3]->wait_exit() == 0);
  for (std::size_t i = 0; i < 3; ++i) CHECK_FALSE(fed.nodes[i]->wait_prefix("left tokyo").empty());
  names.erase(std::find(names.begin(), names.end(), "tokyo"));
  if (!fed.agree({0, 1, 2}, names)) FAIL("the three remaining sites did not agree\n" << fed.logs());
}

// Where Debian's dataset-fashion-mnist installs the data that the compose file mounts as /data.
const fs::path kFashionMnist = meridian::tests::fashion_mnist_dir();

TEST_CASE("the compose sites train together across network namespaces with CURVE and world4",
          "[docker][netns][process]") {
  // What the run needs and this machine may lack: namespaces (root, iproute2, veth and bridge in the
  // kernel: unavailable_reason() builds a trial network) and the dataset. The binary is part of the
  // build, so its absence is a failure, not a skip.
  if (const auto reason = NamespaceNetwork::unavailable_reason()) {
    WARN("SKIPPED: cannot create network namespaces here: " << *reason);
    return;
  }
  MERIDIAN_SKIP_WITHOUT_FASHION_MNIST();
  REQUIRE(fs::exists(meridian::tests::meridian_binary()));
  NamespaceFederation fed;
  const auto n = fed.sites.size();
  // The compose file's command line, with the dataset where Debian installs it instead of the /data
  // volume, and a short run: a quarter of an epoch of each site's quarter of the data.
  for (std::size_t i = 0; i < n; ++i) fed.start_site(i, {"--data-dir", kFashionMnist.string(), "--epochs", "0.25"});

  // While they train, every site lists the same four live members, each with a rank of the same view.
  std::set<std::string> all;
  for (const auto& s : fed.sites) all.insert(s.config.name);
  for (std::size_t i = 0; i < n; ++i) {
    const auto socket = (fed.run_dir(i) / "control.sock").string();
    bool agreed = false;
    const auto deadline = std::chrono::steady_clock::now() + 120s;  // hang guard
    while (!agreed && std::chrono::steady_clock::now() < deadline) {
      try {
        meridian::daemon::ControlClient client(socket, 2s);
        std::set<std::string> alive;
        std::set<int> ranks;
        for (const auto& p : client.peers())
          if (p.state == "alive" && p.rank) {
            alive.insert(p.name);
            ranks.insert(*p.rank);
          }
        agreed = alive == all && ranks == std::set<int>{0, 1, 2, 3};
      } catch (const std::exception&) {
        // Not listening yet, or the run already ended (checked through result.json below).
      }
      if (!agreed && (fed.nodes[i]->output_closed() || fs::exists(fed.run_dir(i) / "result.json"))) break;
      if (!agreed) std::this_thread::sleep_for(100ms);
    }
    if (!agreed) FAIL("site " << fed.sites[i].config.name << " never listed all four as members\n" << fed.logs());
  }

  std::vector<nlohmann::json> results;
  for (std::size_t i = 0; i < n; ++i) {
    const int code = fed.nodes[i]->wait_exit(std::chrono::minutes(5));
    if (code != 0) FAIL("site " << fed.sites[i].config.name << " exited with " << code << "\n" << fed.logs());
    std::ifstream in(fed.run_dir(i) / "result.json");
    REQUIRE(in.good());
    results.push_back(nlohmann::json::parse(in));
  }
  // Converged: every site's model classifies the test set well, and they agree with each other.
  double lowest = 1, highest = 0;
  for (std::size_t i = 0; i < n; ++i) {
    INFO(results[i].dump());
    CHECK(results[i]["site"] == fed.sites[i].config.name);
    CHECK(results[i]["steps"] == results[0]["steps"]);
    CHECK(results[i]["bytes_received"].get<std::uint64_t>() > 0);
    REQUIRE(results[i]["test_accuracy"].is_number());
    const double accuracy = results[i]["test_accuracy"].get<double>();
    lowest = std::min(lowest, accuracy);
    highest = std::max(highest, accuracy);
  }
  CHECK(lowest > 0.6);
  CHECK(highest - lowest < 0.05);
}
