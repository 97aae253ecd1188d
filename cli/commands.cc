#include "cli/commands.h"

namespace meridian::cli {

void register_commands(CLI::App& app, int& exit_code) {
  add_keygen_command(app, exit_code);
  add_peer_node_command(app, exit_code);
  add_init_command(app, exit_code);
  add_status_command(app, exit_code);
  add_peers_command(app, exit_code);
  add_leave_command(app, exit_code);
  add_devices_command(app, exit_code);
  add_train_command(app, exit_code);
  add_start_command(app, exit_code);
  add_eval_command(app, exit_code);
  add_simulate_command(app, exit_code);
}

}  // namespace meridian::cli
