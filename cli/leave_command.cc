// `meridian leave`: asks a running daemon to leave the federation gracefully and stop.
#include <chrono>
#include <cmath>
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "cli/control_target.h"
#include "daemon/control/control_client.h"

namespace meridian::cli {

void add_leave_command(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand(
      "leave",
      "Ask a running daemon to leave: it announces its departure, finishes or abandons the round in flight, "
      "writes a checkpoint and exits");
  cmd->footer(
      "The other sites switch to a view without this one at an announced round and keep training.\n"
      "Exits 0 when the daemon accepted, 1 when it refused (for example because it is already leaving).\n"
      "Examples:\n"
      "  meridian leave\n"
      "  meridian leave --config oregon.toml --json\n");
  auto target = std::make_shared<ControlTarget>();
  add_control_target_options(*cmd, *target);
  cmd->callback([target, &exit_code] {
    daemon::ControlClient client(target->socket_path(),
                                 std::chrono::milliseconds(std::llround(target->timeout_seconds * 1000)));
    const auto leave = client.leave();
    if (target->json) {
      std::cout << daemon::to_json_text(leave) << "\n";
    } else {
      std::cout << leave.message;
      if (leave.effective_round) std::cout << " (the view changes at round " << *leave.effective_round << ")";
      std::cout << "\n";
    }
    exit_code = leave.accepted ? 0 : 1;
  });
}

}  // namespace meridian::cli
