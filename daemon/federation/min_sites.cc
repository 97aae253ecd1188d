#include "daemon/federation/min_sites.h"

#include <algorithm>

#include "daemon/status/human_format.h"

namespace meridian::daemon {

MinSites resolve_min_sites(const SiteConfig& config, const peer::Roster* roster) {
  MinSites out;
  if (roster == nullptr) {
    // Without a roster nothing says how large the federation is: --site-count is the best guess, and
    // a lone site is warned about when it starts training (daemon/start_protocol.cc).
    if (config.min_sites > 0) {
      out.count = static_cast<std::size_t>(config.min_sites);
      out.reason = "--min-sites " + std::to_string(config.min_sites) + " given";
    } else {
      out.count = static_cast<std::size_t>(std::max(config.site_count, 1));
      out.reason = "--site-count " + std::to_string(out.count) + " (--insecure: no roster to count)";
    }
    return out;
  }
  const std::size_t listed = roster->entries().size();
  const std::string sites = format_count(listed, "site");
  const std::size_t asked = roster->quorum().value_or(listed);
  if (config.min_sites > 0) {
    out.count = static_cast<std::size_t>(config.min_sites);
    out.reason = "--min-sites " + std::to_string(config.min_sites) + " given";
    if (out.count < asked) {
      out.warning = "--min-sites " + std::to_string(out.count) + " is below the roster's " +
                    (roster->quorum() ? "quorum " + std::to_string(asked) : "size") + " (it lists " + sites +
                    "): training may start with " + format_count(out.count, "site") + " only";
    } else if (out.count > listed) {
      out.warning = "--min-sites " + std::to_string(out.count) + " is more than the " + sites +
                    " the roster lists: training starts only once the roster grows (meridian roster add)";
    }
  } else if (roster->quorum()) {
    out.count = asked;
    out.reason = "quorum " + std::to_string(asked) + " from the roster (it lists " + sites + ")";
  } else {
    out.count = listed;
    out.reason = "the roster's size (" + sites + ")";
  }
  return out;
}

std::string describe(const MinSites& min_sites) {
  return "min-sites " + std::to_string(min_sites.count) + ": " + min_sites.reason;
}

}  // namespace meridian::daemon
