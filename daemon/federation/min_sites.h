// How many sites must be in the view before a site starts training (--min-sites), and why that many.
// A secure site waits, unless told otherwise, for every site its roster lists, or for the quorum the
// roster states (peer/roster.h): training with fewer is an explicit choice (--min-sites), so that a
// site never trains alone by mistake. A site without a roster (--insecure) waits for --site-count
// sites unless given --min-sites.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

#include "daemon/site_config.h"
#include "peer/roster.h"

namespace meridian::daemon {

struct MinSites {
  std::size_t count = 1;
  // Why `count`, for the start-up line: "the roster's size (3 sites)", "quorum 2 from the roster
  // (3 sites)", "--min-sites 1 given", "--site-count 1 (--insecure: no roster)".
  std::string reason;
  // Set when the choice may surprise: fewer sites than the roster asks for, or more than it lists.
  std::optional<std::string> warning;
};

// `roster`: the roster a secure site reads (nullptr for --insecure). Never throws.
MinSites resolve_min_sites(const SiteConfig& config, const peer::Roster* roster);

// The start-up line: "min-sites 3: the roster's size (3 sites)".
std::string describe(const MinSites& min_sites);

}  // namespace meridian::daemon
