#include "cli/commands.h"

namespace meridian::cli {

void register_commands(CLI::App& app, int& exit_code) {
  (void)app;
  (void)exit_code;
}

}  // namespace meridian::cli
