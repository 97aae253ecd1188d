// `meridian roster`: lists or changes a running site's roster without restarting it (the daemon
// edits its roster file and applies it at once: docs/deploy.md, "Adding and removing sites").
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "cli/control_target.h"
#include "daemon/control/control_client.h"
#include "daemon/control/roster_file.h"
#include "error/error.h"

namespace meridian::cli {
namespace {

void print_roster(const daemon::RosterReport& report, bool table) {
  std::cout << "roster " << report.file << ": " << report.message << "\n";
  if (!table) {
    std::string names;
    for (const auto& s : report.sites) names += (names.empty() ? "" : ", ") + s.name;
    std::cout << report.sites.size() << " sites in force: " << names << "\n";
    return;
  }
  std::printf("%-20s %-40s  %s\n", "NAME", "PUBLIC KEY", "ADDRESS");
  for (const auto& s : report.sites)
    std::printf("%-20s %-40s  %s\n", s.name.c_str(), s.public_key.c_str(), s.address.empty() ? "-" : s.address.c_str());
  std::fflush(stdout);
}

// Adds one `roster` subcommand whose request is `change` (filled by the subcommand's arguments).
CLI::App* add_action(CLI::App& roster, const std::string& name, const std::string& description,
                     std::shared_ptr<daemon::RosterChange> change, int& exit_code, Invocation invocation) {
  auto* cmd = roster.add_subcommand(name, description);
  auto target = std::make_shared<ControlTarget>();
  add_control_target_options(*cmd, *target);
  if (invocation == Invocation::kCheck) {
    cmd->callback([target, change] {});  // parsing is the check; the callback keeps what it parses into
    return cmd;
  }
  cmd->callback([target, change, &exit_code] {
    // The daemon checks too; refusing here names the problem without a round trip.
    if (change->action == daemon::RosterChange::Action::kAdd) {
      if (const auto problem = daemon::roster_entry_problem({change->name, change->public_key, change->address}))
        throw error::UserError("roster add: " + *problem);
    }
    daemon::ControlClient client(target->socket_path(),
                                 std::chrono::milliseconds(std::llround(target->timeout_seconds * 1000)));
    const auto report = client.roster(*change);
    if (target->json) std::cout << daemon::to_json_text(report) << "\n";
    else print_roster(report, change->action == daemon::RosterChange::Action::kList);
    exit_code = 0;
  });
  return cmd;
}

}  // namespace

void add_roster_command(CLI::App& app, int& exit_code, Invocation invocation) {
  auto* roster = app.add_subcommand("roster", "List or change a running site's roster, without restarting it");
  roster->require_subcommand(1);
  roster->footer(
      "The daemon edits its roster file (the comments and other lines stay) and applies the change at once:\n"
      "an added site can join, a removed one is refused and leaves the view. Change the roster at every\n"
      "site. After editing the file by hand, 'reload' (or SIGHUP) applies it.\n\n"
      "Examples:\n"
      "  meridian roster list --config alpha.toml\n"
      "  meridian roster add epsilon 'rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7' tcp://10.0.0.5:7400 --config "
      "alpha.toml\n"
      "  meridian roster remove delta --config alpha.toml\n"
      "  meridian roster reload --socket /var/lib/meridian/control.sock\n");
  using Action = daemon::RosterChange::Action;
  const auto make = [](Action a) {
    auto change = std::make_shared<daemon::RosterChange>();
    change->action = a;
    return change;
  };
  add_action(*roster, "list", "Show the roster in force", make(Action::kList), exit_code, invocation);
  {
    auto change = make(Action::kAdd);
    auto* cmd = add_action(*roster, "add", "Admit a site: append NAME PUBLIC_KEY [ADDRESS] to the roster", change,
                           exit_code, invocation);
    cmd->add_option("name", change->name, "The new site's name")->required();
    cmd->add_option("public_key", change->public_key, "Its public key, as 'meridian keygen' printed it")->required();
    cmd->add_option("address", change->address, "Where it listens (tcp://host:port), if known");
  }
  {
    auto change = make(Action::kRemove);
    auto* cmd = add_action(*roster, "remove", "Refuse a site from now on: drop its line from the roster", change,
                           exit_code, invocation);
    cmd->add_option("name", change->name, "The site to remove")->required();
  }
  add_action(*roster, "reload", "Read the roster file again (as SIGHUP does)", make(Action::kReload), exit_code,
             invocation);
}

}  // namespace meridian::cli
