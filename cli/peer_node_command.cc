// `meridian peer-node` (hidden): a bare site that only runs the transport and membership, for the
// multi-process tests and for poking at a federation by hand. It prints one line per change on stdout:
//   endpoint ADDRESS            once, the address peers should bootstrap from
//   members NAME,NAME,...       the live members (including itself) whenever they change
//   view ID ROUND NAME,...      the newest view whenever it changes
//   dead NAME / left NAME       a member was declared dead (heartbeat timeout) or announced its leave
//   rejected N                  total rejected incoming messages whenever it changes
//   zap-denied N                total connections refused by the CURVE handshake (key not in the roster)
// and reads commands on stdin: "leave" (announce a graceful leave and exit 0); end of input exits
// without a leave.
#include <poll.h>
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <map>
#include <string>

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "cli/commands.h"
#include "error/error.h"
#include "peer/zmq/zmq_transport.h"

namespace meridian::cli {

namespace {

std::string join(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ",") + n;
  return out;
}

struct PeerNodeArgs {
  std::string name, listen = "tcp://127.0.0.1:*", advertise, keys, roster, region, wan;
  std::vector<std::string> bootstrap;
  bool insecure = false;
  int heartbeat_interval_ms = 500, heartbeat_timeout_ms = 3000;
  std::uint64_t fingerprint = 0;
};

int run_peer_node(const PeerNodeArgs& a) {
  // stdout carries the machine-readable lines; logs go to stderr.
  spdlog::set_default_logger(spdlog::stderr_color_mt("peer-node"));
  peer::ZmqTransportOptions o;
  o.name = a.name;
  o.listen = a.listen;
  o.advertise = a.advertise;
  o.region = a.region;
  o.wan = peer::parse_wan_spec(a.wan);
  o.bootstrap = a.bootstrap;
  o.insecure = a.insecure;
  o.heartbeat_interval = std::chrono::milliseconds(a.heartbeat_interval_ms);
  o.heartbeat_timeout = std::chrono::milliseconds(a.heartbeat_timeout_ms);
  o.validation.model_fingerprint = a.fingerprint;
  if (!a.insecure) {
    if (a.keys.empty() || a.roster.empty())
      throw error::UserError("--keys and --roster are required unless --insecure");
    o.keys = peer::read_key_pair(a.keys);
    o.roster = peer::Roster::load(a.roster);
  }
  peer::ZmqTransport t(std::move(o));
  std::printf("endpoint %s\n", t.endpoint().c_str());
  std::fflush(stdout);

  std::vector<std::string> last_members;
  peer::View last_view;
  std::uint64_t last_rejected = 0, last_denied = 0;
  std::map<std::string, peer::MemberState> states;
  bool stdin_open = true;
  while (true) {
    for (const auto& m : t.members()) {
      auto& known = states.try_emplace(m.record.name, peer::MemberState::kAlive).first->second;
      if (m.record.state != known && m.record.state != peer::MemberState::kAlive)
        std::printf("%s %s\n", m.record.state == peer::MemberState::kDead ? "dead" : "left", m.record.name.c_str());
      known = m.record.state;
    }
    auto members = t.alive_members();
    if (members != last_members) {
      std::printf("members %s\n", join(members).c_str());
      last_members = members;
    }
    auto view = t.latest_view();
    if (view != last_view) {
      std::printf("view %llu %llu %s\n", static_cast<unsigned long long>(view.id),
                  static_cast<unsigned long long>(view.effective_round), join(view.members).c_str());
      last_view = view;
    }
    if (auto r = t.rejections().total(); r != last_rejected) {
      std::printf("rejected %llu\n", static_cast<unsigned long long>(r));
      last_rejected = r;
    }
    if (auto d = t.stats().zap_denied; d != last_denied) {
      std::printf("zap-denied %llu\n", static_cast<unsigned long long>(d));
      last_denied = d;
    }
    std::fflush(stdout);
    if (!stdin_open) return 0;
    pollfd pfd{STDIN_FILENO, POLLIN, 0};
    if (::poll(&pfd, 1, 20) > 0) {
      std::string line;
      if (!std::getline(std::cin, line)) {
        stdin_open = false;
        continue;
      }
      if (line == "leave") {
        t.leave();
        std::printf("left\n");
        std::fflush(stdout);
        return 0;
      }
    }
  }
}

}  // namespace

void add_peer_node_command(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("peer-node", "Run a bare site (transport and membership only), for tests");
  cmd->group("");  // hidden from --help: a test harness, not a user command
  cmd->footer(
      "Example:\n  meridian peer-node --name a --insecure\n  meridian peer-node --name b --insecure "
      "--bootstrap tcp://127.0.0.1:PORT");
  auto a = std::make_shared<PeerNodeArgs>();
  cmd->add_option("--name", a->name, "Site name")->required();
  cmd->add_option("--listen", a->listen, "Bind address (default tcp://127.0.0.1:*)");
  cmd->add_option("--advertise", a->advertise, "Address peers connect to (default: the bound address)");
  cmd->add_option("--bootstrap", a->bootstrap, "Address (or NAME@ADDRESS) of a site to contact first");
  cmd->add_option("--keys", a->keys, "Key directory written by 'meridian keygen'");
  cmd->add_option("--roster", a->roster, "Roster file");
  cmd->add_option("--region", a->region, "WAN region of this site (e.g. oregon with --wan world4)");
  cmd->add_option("--wan", a->wan,
                  "Emulated WAN on this site's send path, e.g. world4 or latency=50ms,bandwidth=50mbit");
  cmd->add_flag("--insecure", a->insecure, "Plain TCP without encryption or authentication");
  cmd->add_option("--heartbeat-interval-ms", a->heartbeat_interval_ms, "Heartbeat interval");
  cmd->add_option("--heartbeat-timeout-ms", a->heartbeat_timeout_ms, "Silence after which a peer is dead");
  cmd->add_option("--fingerprint", a->fingerprint, "Model fingerprint to announce and require");
  cmd->callback([a, &exit_code] { exit_code = run_peer_node(*a); });
}

}  // namespace meridian::cli
