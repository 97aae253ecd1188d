// `meridian peers`: the sites a running daemon knows, with their state, rank, RTT and traffic.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "cli/control_target.h"
#include "daemon/control/control_client.h"
#include "daemon/status/human_format.h"

namespace meridian::cli {
namespace {

void print_peers(const std::vector<daemon::PeerReport>& peers) {
  if (peers.empty()) {
    std::cout << "no peers known yet\n";
    return;
  }
  std::printf("%-20s %-8s %4s %9s %11s %9s %9s  %s\n", "NAME", "STATE", "RANK", "RTT", "LAST HEARD", "SENT", "RECEIVED",
              "ADDRESS");
  for (const auto& p : peers) {
    const std::string rank = p.rank ? std::to_string(*p.rank) : "-";
    const std::string rtt = p.rtt_seconds ? daemon::format_duration(*p.rtt_seconds) : "-";
    const std::string heard = p.last_heard_seconds ? daemon::format_duration(*p.last_heard_seconds) : "-";
    std::printf("%-20s %-8s %4s %9s %11s %9s %9s  %s\n", p.name.c_str(), p.state.c_str(), rank.c_str(), rtt.c_str(),
                heard.c_str(), daemon::format_bytes(static_cast<double>(p.bytes_sent)).c_str(),
                daemon::format_bytes(static_cast<double>(p.bytes_received)).c_str(), p.address.c_str());
  }
  std::fflush(stdout);
}

}  // namespace

void add_peers_command(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("peers", "List the sites a running daemon knows: state, rank, RTT, traffic");
  cmd->footer(
      "Examples:\n"
      "  meridian peers\n"
      "  meridian peers --socket /var/lib/meridian/control.sock --json\n");
  auto target = std::make_shared<ControlTarget>();
  add_control_target_options(*cmd, *target);
  cmd->callback([target, &exit_code] {
    daemon::ControlClient client(target->socket_path(),
                                 std::chrono::milliseconds(std::llround(target->timeout_seconds * 1000)));
    const auto peers = client.peers();
    if (target->json) {
      std::cout << daemon::to_json_text(peers) << "\n";
    } else {
      print_peers(peers);
    }
    exit_code = 0;
  });
}

}  // namespace meridian::cli
