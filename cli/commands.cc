#include "cli/commands.h"

namespace meridian::cli {

void register_commands(CLI::App& app, int& exit_code, Invocation invocation) {
  add_keygen_command(app, exit_code);
  add_peer_node_command(app, exit_code);
  add_init_command(app, exit_code, invocation);
  add_status_command(app, exit_code);
  add_peers_command(app, exit_code);
  add_leave_command(app, exit_code);
  add_roster_command(app, exit_code, invocation);
  add_devices_command(app, exit_code);
  add_train_command(app, exit_code);
  add_start_command(app, exit_code, invocation);
  add_eval_command(app, exit_code);
  add_export_command(app, exit_code);
  add_simulate_command(app, exit_code, invocation);
  if (invocation == Invocation::kCheck) {
    // These check nothing beyond what CLI11's parse does (names, types, existing files); checking
    // them is parsing them, and running them is left out.
    for (auto* command : app.get_subcommands({})) {
      const auto& name = command->get_name();
      if (name != "init" && name != "start" && name != "simulate") command->callback([] {});
    }
  }
}

}  // namespace meridian::cli
