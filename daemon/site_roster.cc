// Roster changes while the site runs: `meridian roster list|add|remove|reload` over the control socket
// and SIGHUP (a reload). The roster file stays the one record of the roster (daemon/control/roster_file.h);
// the transport applies the new roster at once (peer/federation_transport.h: set_roster), so an added
// site can join and a removed one is refused and leaves the view, with nobody restarting.
#include <filesystem>

#include <spdlog/spdlog.h>

#include "daemon/control/roster_file.h"
#include "daemon/site_daemon_impl.h"

namespace meridian::daemon {
namespace {

std::vector<RosterSite> sites_of(const peer::Roster& roster) {
  std::vector<RosterSite> out;
  for (const auto& e : roster.entries()) out.push_back(RosterSite{e.name, e.public_key, e.address});
  return out;
}

}  // namespace

RosterReport SiteDaemon::Impl::roster(const RosterChange& change) {
  if (config.insecure || !control.roster_in_force) {
    throw error::UserError("site '" + config.name +
                           "' runs without CURVE (--insecure): it has no roster, and any site that reaches it "
                           "may join");
  }
  const std::filesystem::path file = config.roster;
  const std::string source = "roster " + file.string();
  RosterReport report;
  report.file = file.string();
  if (change.action == RosterChange::Action::kList) {
    report.message = std::to_string(control.roster_in_force->entries().size()) + " sites";
    report.sites = sites_of(*control.roster_in_force);
    return report;
  }
  std::string text;
  switch (change.action) {
    case RosterChange::Action::kAdd:
      text = roster_text_adding(read_roster_text(file), {change.name, change.public_key, change.address}, source);
      break;
    case RosterChange::Action::kRemove:
      if (change.name == config.name) {
        throw error::UserError("'" + config.name +
                               "' is this site: it cannot remove itself from its own roster. To take it out of the "
                               "federation, run 'meridian leave' here and 'meridian roster remove " +
                               config.name + "' at the other sites");
      }
      text = roster_text_removing(read_roster_text(file), change.name, source);
      break;
    case RosterChange::Action::kReload: text = read_roster_text(file); break;
    case RosterChange::Action::kList: break;
  }
  const auto next = peer::Roster::parse(text, source);
  if (change.action == RosterChange::Action::kReload) {
    // Checked by the transport before anything changes: this site must stay listed with its own key.
    transport->set_roster(next);
  } else {
    // An edit cannot touch this site's own line, so the transport will take it; the file comes first,
    // so that a file that cannot be written leaves the running roster as it was.
    write_roster_text(file, text);
    transport->set_roster(next);
  }
  report.message = describe_roster_change(*control.roster_in_force, next);
  control.roster_in_force = next;
  *secure_roster.lock() = next;
  reachability.set_roster(names_of(next));
  report.sites = sites_of(next);
  spdlog::info("{}: {}", source, report.message);
  return report;
}

void SiteDaemon::Impl::reload_roster_on_signal() {
  try {
    const auto report = roster(RosterChange{RosterChange::Action::kReload, {}, {}, {}});
    spdlog::info("SIGHUP: roster {} reloaded: {}", report.file, report.message);
  } catch (const std::exception& e) {
    spdlog::error("SIGHUP: roster not reloaded: {}; the roster in force is unchanged", e.what());
  }
}

}  // namespace meridian::daemon
