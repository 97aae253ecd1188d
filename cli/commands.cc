#include "cli/commands.h"

namespace meridian::cli {

void add_train_command(CLI::App& app, int& exit_code);

void register_commands(CLI::App& app, int& exit_code) {
  add_train_command(app, exit_code);
}

}  // namespace meridian::cli
