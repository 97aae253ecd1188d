// `meridian keygen`: creates a site's CurveZMQ identity.
#include <cstdio>

#include "cli/commands.h"
#include "peer/curve_keys.h"

namespace meridian::cli {

void add_keygen_command(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("keygen", "Create this site's CurveZMQ key pair");
  cmd->footer(
      "Writes DIR/public.key (readable) and DIR/secret.key (mode 0600) and prints the public key.\n"
      "Add the printed key to the federation's roster as 'NAME PUBLIC_KEY [ADDRESS]'.\n\n"
      "Example:\n  meridian keygen --out /etc/meridian/keys\n  echo \"oregon $(tail -n1 /etc/meridian/keys/public.key) "
      "tcp://10.0.0.1:7000\" >> roster.txt");
  auto dir = std::make_shared<std::string>();
  auto force = std::make_shared<bool>(false);
  cmd->add_option("--out", *dir, "Directory for public.key and secret.key (created if missing)")->required();
  cmd->add_flag("--force", *force, "Overwrite an existing key pair (the site gets a new identity)");
  cmd->callback([dir, force, &exit_code] {
    const auto keys = peer::generate_curve_key_pair();
    peer::write_key_pair(keys, *dir, *force);
    std::printf("%s\n", keys.public_key.c_str());
    exit_code = 0;
  });
}

}  // namespace meridian::cli
