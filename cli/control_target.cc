#include "cli/control_target.h"

#include "daemon/site_config.h"

namespace meridian::cli {

std::string ControlTarget::socket_path() const {
  if (!socket.empty()) return socket;
  if (!config.empty()) return daemon::read_site_config_file(config).control_socket_or_default();
  return daemon::SiteConfig{}.control_socket_or_default();
}

void add_control_target_options(CLI::App& command, ControlTarget& target) {
  command
      .add_option("--socket", target.socket,
                  "The daemon's control socket (default: from --config, else " +
                      daemon::SiteConfig{}.control_socket_or_default() + ")")
      ->type_name("PATH");
  command.add_option("--config", target.config, "The site's config file, to find its control socket")
      ->type_name("FILE")
      ->check(CLI::Validator(CLI::ExistingFile).description(""));
  command.add_option("--timeout", target.timeout_seconds, "Seconds to wait for the daemon's answer")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  command.add_flag("--json", target.json, "Print the answer as JSON");
}

}  // namespace meridian::cli
