// A member that turns hostile: it holds a valid identity (a roster key) and speaks the membership
// protocol, and it forges what only other sites may say of themselves (their deaths, leaves,
// incarnations, addresses, rounds), proposes views with invented names or without a live site, claims
// incarnations and rounds nobody can hold and refuses sites that never joined through it. Every attack is refused and counted, and no view loses an honest
// site: in an in-memory federation, and against `meridian start` processes with CurveZMQ on 127.0.0.1.
#include <catch2/catch.hpp>

#include <signal.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <regex>
#include <string>
#include <thread>
#include <vector>
#include <zmq.hpp>

#include "daemon/control/control_client.h"
#include "peer/in_memory_federation.h"
#include "peer/wire_codec.h"
#include "peer/zmq/zmq_socket_monitor.h"
#include "tests/daemon/federation_process_support.h"
#include "tests/daemon/http_get.h"
#include "tests/daemon/site_process.h"
#include "tests/support/eventually.h"
#include "tests/support/temp_dir.h"

namespace fs = std::filesystem;
using namespace meridian::peer;
using namespace std::chrono_literals;

namespace {

InMemoryFederationOptions member(const std::string& name, std::vector<std::string> bootstrap = {}) {
  InMemoryFederationOptions o;
  o.name = name;
  o.bootstrap = std::move(bootstrap);
  o.heartbeat_interval = 50ms;
  o.heartbeat_timeout = 10s;  // no death from starved threads: deaths here could only be forged
  return o;
}

Message membership_message(MessageKind kind, std::string body) {
  Message m;
  m.kind = kind;
  m.body = std::move(body);
  return m;
}

// The incarnation of `name` in the table of `at`.
std::uint64_t incarnation_at(const FederationTransport& at, const std::string& name) {
  for (const auto& m : at.members())
    if (m.record.name == name) return m.record.incarnation;
  return 0;
}

std::uint64_t count(const std::vector<InMemoryFederation*>& sites, RejectCause cause) {
  std::uint64_t n = 0;
  for (const auto* s : sites) n += s->rejections().count(cause);
  return n;
}

}  // namespace

TEST_CASE("in-memory federation: a hostile member's forged records, views and refusals are refused and counted",
          "[peer][membership][cluster]") {
  auto net = InMemoryNetwork::create({"h"});
  InMemoryFederation a(net, member("a"));
  InMemoryFederation b(net, member("b", {"a"}));
  InMemoryFederation c(net, member("c", {"a"}));
  const std::vector<InMemoryFederation*> honest{&a, &b, &c};
  const std::vector<std::string> all{"a", "b", "c"};
  auto agree = [&] {
    return std::all_of(honest.begin(), honest.end(), [&](const InMemoryFederation* s) {
      return s->alive_members() == all && s->latest_view().members == all && s->latest_view() == a.latest_view();
    });
  };
  REQUIRE(meridian::tests::eventually(agree));
  const auto b_incarnation = incarnation_at(a, "b");
  REQUIRE(b_incarnation != 0);

  // h speaks the protocol from a plain endpoint: the network names it "h" as a connection would.
  auto h = net->endpoint("h");
  auto send_all = [&](const Message& m) {
    for (const auto* s : honest) h->send(s->self(), m);
  };
  MemberListInfo forged;
  forged.members = {{"b", "tcp://b.in-memory.invalid:1", "", b_incarnation, MemberState::kLeft}};
  send_all(membership_message(MessageKind::kMembers, encode_members(forged)));
  forged.members = {{"b", "tcp://b.in-memory.invalid:1", "", b_incarnation, MemberState::kDead}};
  send_all(membership_message(MessageKind::kMembers, encode_members(forged)));
  forged.members = {{"b", "tcp://b.in-memory.invalid:1", "", b_incarnation + 1000, MemberState::kAlive}};
  send_all(membership_message(MessageKind::kMembers, encode_members(forged)));
  HelloInfo refusal{"h", "tcp://h.in-memory.invalid:1", "", 1, 0, {}, "h refuses this site: model differs"};
  send_all(membership_message(MessageKind::kHello, encode_hello(refusal)));

  // a and c refuse all three; b refuses "b left" and refutes "b dead" with one step.
  REQUIRE(meridian::tests::eventually([&] {
    return a.rejections().count(RejectCause::kUnvouched) == 3 && c.rejections().count(RejectCause::kUnvouched) == 3 &&
           b.rejections().count(RejectCause::kUnvouched) == 1;
  }));
  REQUIRE(meridian::tests::eventually([&] { return count(honest, RejectCause::kStrayRefusal) == 3; }));
  for (const auto* s : honest) CHECK_FALSE(s->refusal());
  // Many heartbeats later (each site has taken a hundred more messages, and ticked as often) nothing
  // moved: b is alive everywhere, in every site's newest view, at the incarnation it announced.
  const auto view = a.latest_view();
  const auto received = a.stats().messages_received;
  REQUIRE(meridian::tests::eventually([&] { return a.stats().messages_received >= received + 100; }));
  CHECK(agree());
  CHECK(a.latest_view() == view);
  for (const auto* s : {&a, &c}) CHECK(incarnation_at(*s, "b") <= b_incarnation + 1);
}

namespace {

// meridian_rejected_messages_total{cause} of a site's /metrics; -1 when it cannot be read.
double rejected(const meridian::tests::SiteProcess& site, const std::string& cause) {
  const int port = meridian::tests::metrics_port(site.log());
  if (port == 0) return -1;
  const auto body = meridian::tests::http_body(meridian::tests::http_get(port, "/metrics"));
  const std::string name = "\nmeridian_rejected_messages_total{cause=\"" + cause + "\"} ";
  const auto at = body.find(name);
  return at == std::string::npos ? 0 : std::stod(body.substr(at + name.size()));
}

// The site's status; nullopt while its control socket does not answer.
std::optional<meridian::daemon::StatusReport> status_of(const meridian::tests::SiteProcess& site) {
  try {
    return meridian::daemon::ControlClient((site.run_dir() / "control.sock").string()).status();
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

int peers_alive(const meridian::tests::SiteProcess& site) {
  const auto status = status_of(site);
  return status ? status->peers_alive : -1;
}

// The hostile site's connection to one honest site: a DEALER with its roster key, as a site's own.
struct HostileLink {
  zmq::socket_t socket;
  HostileLink(zmq::context_t& ctx, const CurveKeyPair& own, const std::string& server_key, const std::string& endpoint)
      : socket(ctx, zmq::socket_type::dealer) {
    socket.set(zmq::sockopt::linger, 0);
    socket.set(zmq::sockopt::curve_serverkey, server_key);
    socket.set(zmq::sockopt::curve_publickey, own.public_key);
    socket.set(zmq::sockopt::curve_secretkey, own.secret_key);
    socket.connect(endpoint);
  }
  void send(MessageKind kind, std::string body, std::uint64_t fingerprint) {
    static std::uint64_t id = 1u << 30;
    Message m;
    m.kind = kind;
    m.body = std::move(body);
    const auto chunks = encode_message(m, fingerprint, id++, WireLimits{});
    REQUIRE(chunks.size() == 1);
    REQUIRE(socket.send(zmq::buffer(chunks[0].header), zmq::send_flags::none));
  }
};

// A listener with the hostile site's own key at an address it gossips for another site: a site that
// dials it there pins that other site's key, so no handshake can succeed and nothing is delivered.
struct Trap {
  zmq::socket_t socket;
  std::string address;
  std::optional<ZmqSocketMonitor> monitor;
  int accepted = 0, handshakes_ok = 0;
  Trap(zmq::context_t& ctx, const CurveKeyPair& own) : socket(ctx, zmq::socket_type::router) {
    socket.set(zmq::sockopt::linger, 0);
    socket.set(zmq::sockopt::curve_server, true);
    socket.set(zmq::sockopt::curve_secretkey, own.secret_key);
    monitor.emplace(ctx, socket, ZMQ_EVENT_ACCEPTED | ZMQ_EVENT_HANDSHAKE_SUCCEEDED);
    socket.bind("tcp://127.0.0.1:*");
    address = socket.get(zmq::sockopt::last_endpoint);
  }
  ~Trap() { monitor.reset(); }
  void poll() {
    for (const auto& e : monitor->drain()) {
      if (e.kind == ZMQ_EVENT_ACCEPTED) ++accepted;
      else if (e.kind == ZMQ_EVENT_HANDSHAKE_SUCCEEDED) ++handshakes_ok;
    }
  }
  // Whether any message was delivered to it (never blocks).
  bool delivered() {
    zmq::message_t m;
    return socket.recv(m, zmq::recv_flags::dontwait).has_value();
  }
};

}  // namespace

TEST_CASE("a hostile rostered site cannot stop, evict or speak for the sites of a running federation",
          "[peer][membership][security][process]") {
  meridian::tests::TempDir dir;
  const auto table = meridian::tests::write_small_table(dir.path());
  const std::vector<std::string> honest{"a", "b", "c"};
  const meridian::tests::SiteKeys keys(dir.path(), {"a", "b", "c", "h"});
  std::ofstream(dir.path() / "roster.txt") << keys.roster({"a", "b", "c", "h"});
  auto args = [&](const std::string& name, int index) {
    return meridian::tests::training_site_args(name, index, 3, table)
        .secure(dir.path() / ("keys-" + name), dir.path() / "roster.txt")
        .set("--min-sites", 3);
  };
  using meridian::tests::SiteProcess;
  std::map<std::string, std::unique_ptr<SiteProcess>> sites;
  zmq::context_t ctx;  // before the links: their sockets close before it terminates
  std::map<std::string, std::unique_ptr<HostileLink>> links;
  Trap trap(ctx, keys.of.at("h"));
  // h refuses every site the moment it listens, while it waits for its view: none joins through h.
  const HelloInfo refusal{"h", "tcp://127.0.0.1:9", "", 1, 0, {}, "h refuses this site: model differs"};
  std::string join_a;
  std::uint64_t fingerprint = 0;
  for (std::size_t i = 0; i < honest.size(); ++i) {
    const auto& name = honest[i];
    if (name == "c") {
      // The roster gives no addresses: before c starts, h tells a and b that c listens at h's trap.
      // Each dials it as a probe with c's key pinned; c's own hello later says where it listens.
      MemberListInfo rumour;
      rumour.members = {{"c", trap.address, "", 1, MemberState::kAlive}};
      for (const auto& told : {"a", "b"}) links[told]->send(MessageKind::kMembers, encode_members(rumour), fingerprint);
      REQUIRE(meridian::tests::eventually_from_process([&] {
        trap.poll();
        return trap.accepted >= 2;
      }));
    }
    auto site_args = args(name, static_cast<int>(i));
    if (!join_a.empty()) site_args.join(join_a);
    sites[name] = std::make_unique<SiteProcess>(dir.path() / name, site_args);
    const auto endpoint = sites[name]->endpoint();
    REQUIRE(endpoint.rfind("tcp://127.0.0.1:", 0) == 0);
    if (join_a.empty()) join_a = "a@" + endpoint;
    std::smatch m;
    REQUIRE(meridian::tests::eventually_from_process([&] {
      const auto log = sites[name]->log();
      return std::regex_search(log, m, std::regex("wire fingerprint ([0-9a-f]{16})")) || sites[name]->exited();
    }));
    const auto log = sites[name]->log();
    REQUIRE(std::regex_search(log, m, std::regex("wire fingerprint ([0-9a-f]{16})")));
    fingerprint = std::stoull(m[1], nullptr, 16);
    links[name] = std::make_unique<HostileLink>(ctx, keys.of.at("h"), keys.of.at(name).public_key, endpoint);
    links[name]->send(MessageKind::kHello, encode_hello(refusal), fingerprint);
  }
  auto logs = [&] {
    std::string text;
    for (const auto& name : honest) text += "log of " + name + ":\n" + sites[name]->log() + "\n";
    return text;
  };
  INFO(logs());
  REQUIRE(meridian::tests::eventually_from_process([&] {
    return std::all_of(honest.begin(), honest.end(),
                       [&](const auto& n) { return peers_alive(*sites[n]) == 3 || sites[n]->exited(); });
  }));
  for (const auto& name : honest) REQUIRE_FALSE(sites[name]->exited());
  // The forgeries come while they train.
  REQUIRE(meridian::tests::eventually_from_process([&] {
    const auto status = status_of(*sites["a"]);
    return (status && status->step > 10) || sites["a"]->exited();
  }));

  // The forgeries, each to every site. An incarnation above any site's: milliseconds since the epoch now.
  const auto later = static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count());
  std::map<std::string, std::map<std::string, int>> expected;  // site -> cause -> count
  const std::vector<std::string> kCounted{"unvouched",        "incarnation",      "invented_member",
                                          "stray_refusal",    "unjustified_view", "implausible_round"};
  for (const auto& name : honest) expected[name]["stray_refusal"] = 1;
  auto forge = [&](std::vector<MemberRecord> records, std::vector<View> views,
                   const std::map<std::string, std::string>& cause_at, std::uint64_t round = 0) {
    MemberListInfo list;
    list.members = std::move(records);
    list.views = std::move(views);
    list.round = round;
    for (const auto& name : honest) {
      links[name]->send(MessageKind::kMembers, encode_members(list), fingerprint);
      if (auto it = cause_at.find(name); it != cause_at.end()) ++expected[name][it->second];
    }
  };
  const auto top = std::numeric_limits<std::uint64_t>::max();
  // "b left", "b dead": b itself refuses a leave it did not announce and a verdict above its incarnation.
  forge({{"b", "", "", later, MemberState::kLeft}}, {}, {{"a", "unvouched"}, {"b", "unvouched"}, {"c", "unvouched"}});
  forge({{"b", "", "", later, MemberState::kDead}}, {}, {{"a", "unvouched"}, {"b", "incarnation"}, {"c", "unvouched"}});
  // c at the largest incarnation: only c says which incarnation it has.
  forge({{"c", "", "", top, MemberState::kAlive}}, {}, {{"a", "unvouched"}, {"b", "unvouched"}});
  // A view and a record with a name outside the roster.
  forge({}, {View::of({"a", "b", "c", "ghost"}, 1000, 1000000)},
        {{"a", "invented_member"}, {"b", "invented_member"}, {"c", "invented_member"}});
  forge({{"ghost", "tcp://127.0.0.1:9", "", 1, MemberState::kAlive}}, {},
        {{"a", "invented_member"}, {"b", "invented_member"}, {"c", "invented_member"}});
  // A view of real names that leaves out b, which every site (b too) still hears: held back.
  const auto in_force = status_of(*sites["a"]);
  REQUIRE(in_force);
  forge({}, {View::of({"a", "c"}, in_force->view_id + 1, in_force->step + 2)},
        {{"a", "unjustified_view"}, {"b", "unjustified_view"}, {"c", "unjustified_view"}});
  // A round far ahead of everybody's, in a member list and in a heartbeat: neither is believed.
  const std::uint64_t far_round = std::uint64_t{1} << 50;
  forge({}, {}, {{"a", "implausible_round"}, {"b", "implausible_round"}, {"c", "implausible_round"}}, far_round);
  for (const auto& name : honest) {
    links[name]->send(MessageKind::kHeartbeat, encode_heartbeat(HeartbeatInfo{.incarnation = 1, .round = far_round}),
                      fingerprint);
    ++expected[name]["implausible_round"];
  }

  const bool all_counted = meridian::tests::eventually_from_process([&] {
    for (const auto& [name, causes] : expected)
      for (const auto& [cause, n] : causes)
        if (rejected(*sites[name], cause) < n) return false;
    return true;
  });
  std::string counts;
  for (const auto& [name, causes] : expected)
    for (const auto& cause : kCounted)
      counts += name + " " + cause + ": " + std::to_string(rejected(*sites[name], cause)) + " (sent " +
                std::to_string(causes.contains(cause) ? causes.at(cause) : 0) + ")\n";
  INFO(counts);
  REQUIRE(all_counted);
  for (const auto& [name, causes] : expected)
    for (const auto& cause : kCounted) {
      INFO(name << " " << cause);
      CHECK(rejected(*sites[name], cause) == (causes.contains(cause) ? causes.at(cause) : 0));
    }

  // Training goes on with all three: the steps advance by 40 (two view leads and more), every site
  // counts three live members throughout, and no site ever saw an honest one die or leave.
  const auto before = status_of(*sites["a"]);
  REQUIRE(before);
  REQUIRE(meridian::tests::eventually_from_process([&] {
    const auto now = status_of(*sites["a"]);
    if (now) CHECK(now->peers_alive == 3);
    return (now && now->step > before->step + 40) || sites["a"]->exited();
  }));
  for (const auto& name : honest) {
    CHECK(peers_alive(*sites[name]) == 3);
    const auto log = sites[name]->log();
    for (const auto& other : honest) {
      INFO(name << " about " << other);
      CHECK(log.find("member '" + other + "' is dead") == std::string::npos);
      CHECK(log.find("member '" + other + "' left") == std::string::npos);
    }
    CHECK(log.find("ghost' is alive") == std::string::npos);
  }
  // Every site dialed the trap as a probe for c, and none of those connections authenticated or
  // carried a message; c joined at its own address all the same.
  trap.poll();
  CHECK(trap.accepted >= 2);
  CHECK(trap.handshakes_ok == 0);
  CHECK_FALSE(trap.delivered());
  for (const auto& name : honest) sites[name]->signal(SIGINT);
  for (const auto& name : honest) CHECK(sites[name]->wait_exit() == 0);
}

namespace {

// The value of metric `name` (a counter without labels) on a site's /metrics; -1 when it cannot be read.
double metric(const meridian::tests::SiteProcess& site, const std::string& name) {
  const int port = meridian::tests::metrics_port(site.log());
  if (port == 0) return -1;
  const auto body = meridian::tests::http_body(meridian::tests::http_get(port, "/metrics"));
  const auto at = body.find("\n" + name + " ");
  return at == std::string::npos ? -1 : std::stod(body.substr(at + name.size() + 2));
}

// Three `meridian start` sites a, b, c train with CurveZMQ under a roster that also lists d, which
// never starts, and h, the hostile member, which holds a connection to each site (links) and the
// sites' model fingerprint. --round-timeout 2: rounds wait 1 s for a view not in force
// (daemon::view_wait_bound), and a site takes one view listing a site it has not heard from per 10 s.
struct FederationWithHostileMember {
  meridian::tests::TempDir dir;
  const std::vector<std::string> honest{"a", "b", "c"};
  meridian::tests::SiteKeys keys{dir.path(), {"a", "b", "c", "d", "h"}};
  std::map<std::string, std::unique_ptr<meridian::tests::SiteProcess>> sites;
  zmq::context_t ctx;  // before the links: their sockets close before it terminates
  std::map<std::string, std::unique_ptr<HostileLink>> links;
  std::uint64_t fingerprint = 0;

  FederationWithHostileMember() {
    const auto table = meridian::tests::write_small_table(dir.path());
    std::ofstream(dir.path() / "roster.txt") << keys.roster({"a", "b", "c", "d", "h"});
    std::string join_a;
    for (std::size_t i = 0; i < honest.size(); ++i) {
      const auto& name = honest[i];
      auto args = meridian::tests::training_site_args(name, static_cast<int>(i), 3, table)
                      .secure(dir.path() / ("keys-" + name), dir.path() / "roster.txt")
                      .set("--min-sites", 3)
                      .set("--round-timeout", 2);
      if (!join_a.empty()) args.join(join_a);
      sites[name] = std::make_unique<meridian::tests::SiteProcess>(dir.path() / name, args);
      const auto endpoint = sites[name]->endpoint();
      REQUIRE(endpoint.rfind("tcp://127.0.0.1:", 0) == 0);
      if (join_a.empty()) join_a = "a@" + endpoint;
      std::smatch m;
      REQUIRE(meridian::tests::eventually_from_process([&] {
        const auto log = sites[name]->log();
        return std::regex_search(log, m, std::regex("wire fingerprint ([0-9a-f]{16})")) || sites[name]->exited();
      }));
      const auto log = sites[name]->log();
      REQUIRE(std::regex_search(log, m, std::regex("wire fingerprint ([0-9a-f]{16})")));
      fingerprint = std::stoull(m[1], nullptr, 16);
      links[name] = std::make_unique<HostileLink>(ctx, keys.of.at("h"), keys.of.at(name).public_key, endpoint);
    }
    REQUIRE(meridian::tests::eventually_from_process([&] {
      return std::all_of(honest.begin(), honest.end(), [&](const auto& n) {
        const auto status = status_of(*sites[n]);
        return (status && status->peers_alive == 3 && status->step > 10) || sites[n]->exited();
      });
    }));
    for (const auto& name : honest) REQUIRE_FALSE(sites[name]->exited());
  }
  ~FederationWithHostileMember() {
    for (const auto& name : honest)
      if (!sites[name]->exited()) sites[name]->kill_hard();
  }

  std::string logs() const {
    std::string text;
    for (const auto& name : honest) text += "log of " + name + ":\n" + sites.at(name)->log() + "\n";
    return text;
  }
  // The largest round any honest site reports.
  std::uint64_t newest_step() const {
    std::uint64_t step = 0;
    for (const auto& name : honest)
      if (const auto status = status_of(*sites.at(name))) step = std::max(step, status->step);
    return step;
  }
  // h proposes `v` to every honest site.
  void propose(const View& v) {
    MemberListInfo list;
    list.views = {v};
    for (const auto& name : honest) links[name]->send(MessageKind::kMembers, encode_members(list), fingerprint);
  }
  // Training goes on with all three until every site has run `rounds` more rounds, each counting
  // three live members; no site ever saw an honest one die or leave.
  void trains_on(std::uint64_t rounds) {
    const auto target = newest_step() + rounds;
    REQUIRE(meridian::tests::eventually_from_process([&] {
      return std::all_of(honest.begin(), honest.end(), [&](const auto& n) {
        const auto status = status_of(*sites[n]);
        return (status && status->step >= target) || sites[n]->exited();
      });
    }));
    for (const auto& name : honest) {
      REQUIRE_FALSE(sites[name]->exited());
      CHECK(peers_alive(*sites[name]) == 3);
      const auto log = sites[name]->log();
      for (const auto& other : honest) {
        INFO(name << " about " << other);
        CHECK(log.find("member '" + other + "' is dead") == std::string::npos);
        CHECK(log.find("member '" + other + "' left") == std::string::npos);
      }
    }
  }
  // Each site stops cleanly.
  void stop() {
    for (const auto& name : honest) sites[name]->signal(SIGINT);
    for (const auto& name : honest) {
      const int code = sites[name]->wait_exit();
      INFO("log of " << name << ":\n" << sites[name]->log());
      CHECK(code == 0);
    }
  }
};

}  // namespace

TEST_CASE("a view with a rostered site that never starts is waited for once at its round, given up, and training "
          "goes on",
          "[peer][membership][security][process]") {
  FederationWithHostileMember f;
  INFO(f.logs());
  const auto in_force = status_of(*f.sites["a"]);
  REQUIRE(in_force);
  std::map<std::string, double> given_up;
  for (const auto& name : f.honest) {
    given_up[name] = metric(*f.sites[name], "meridian_view_waits_given_up_total");
    REQUIRE(given_up[name] >= 0);
  }
  // d is rostered but never heard from: the view never comes into force, since d never holds it. Its
  // first round lies ahead of every site's.
  const View with_d = View::of({"a", "b", "c", "d"}, in_force->view_id + 1, f.newest_step() + 60);
  f.propose(with_d);
  // Each site's round with_d.effective_round waits for it, at most the view wait, then runs in the view
  // in force, counts the wait given up and says so in its log.
  REQUIRE(meridian::tests::eventually_from_process([&] {
    return std::all_of(f.honest.begin(), f.honest.end(), [&](const auto& n) {
      return metric(*f.sites[n], "meridian_view_waits_given_up_total") >= given_up[n] + 1 || f.sites[n]->exited();
    });
  }));
  f.trains_on(40);
  for (const auto& name : f.honest) {
    INFO(name);
    CHECK(metric(*f.sites[name], "meridian_view_waits_given_up_total") == given_up[name] + 1);
    CHECK(f.sites[name]->log().find("view " + std::to_string(with_d.id) + " (4 sites) is still not in force") !=
          std::string::npos);
    CHECK(rejected(*f.sites[name], "hearsay_view") == 0);
  }
  f.stop();
}

TEST_CASE("a hostile member proposing views with an absent site one after another stalls each site once per "
          "hearsay interval at most",
          "[peer][membership][security][process]") {
  FederationWithHostileMember f;
  std::map<std::string, double> given_up;
  std::map<std::string, std::size_t> log_from;
  for (const auto& name : f.honest) {
    given_up[name] = metric(*f.sites[name], "meridian_view_waits_given_up_total");
    log_from[name] = f.sites[name]->log().size();
  }
  // For 25 s, every 100 ms, h proposes a view with d under a new id, from a round just ahead of the
  // federation's: without a limit, a site takes every one, and each stalls its rounds once more. The ids
  // step by three: a proposal for an id a site already holds is a rival, which a site holds back whatever
  // the interval while it lists a site not heard from, and a site that takes a view with d proposes the
  // view without it under the next id itself.
  const auto first = status_of(*f.sites["a"]);
  REQUIRE(first);
  std::uint64_t id = first->view_id + 1;
  const auto start = std::chrono::steady_clock::now();
  int proposals = 0;
  while (std::chrono::steady_clock::now() - start < 25s) {
    f.propose(View::of({"a", "b", "c", "d"}, id, f.newest_step() + 10));
    id += 3;
    ++proposals;
    std::this_thread::sleep_for(100ms);
  }
  const auto elapsed = std::chrono::steady_clock::now() - start;
  INFO(proposals << " proposals in " << std::chrono::duration_cast<std::chrono::milliseconds>(elapsed).count()
                 << " ms");
  // A site takes one such view per 10 s (the first at once) and holds the rest back, each counted. Each
  // view it takes costs it one given-up wait of 1 s at most, and a change of the view in force: at its
  // next tick it proposes the view without d, which every site takes and runs. Views still held back
  // when the flood ends are taken one per 10 s after it too, so the bound counts the time until the
  // counters are read.
  f.trains_on(40);
  INFO(f.logs());
  const auto allowed =
      1 + std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - start).count() / 10;
  INFO(allowed << " views with d allowed");
  for (const auto& name : f.honest) {
    INFO(name);
    const auto waits = metric(*f.sites[name], "meridian_view_waits_given_up_total") - given_up[name];
    INFO("waits given up: " << waits << ", hearsay views held back: " << rejected(*f.sites[name], "hearsay_view"));
    CHECK(waits <= allowed);
    const auto log = f.sites[name]->log().substr(log_from[name]);
    const std::regex view_in_force(R"(view \d+ in force)");
    const auto changes = std::distance(std::sregex_iterator(log.begin(), log.end(), view_in_force), std::sregex_iterator());
    INFO("views that came into force: " << changes);
    CHECK(changes <= 2 * allowed);
    CHECK(rejected(*f.sites[name], "hearsay_view") >= proposals / 2);
  }
  f.stop();
}
