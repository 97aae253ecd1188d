// A site's two deadlines, given as numbers or `auto` (the default): --round-timeout, after which a
// mixing round is abandoned, and --heartbeat-timeout, after which a silent member is declared dead.
// A number is used as it is. `auto` makes each follow what the site measures (peer/adaptive_deadline.h:
// clamp(factor × median + k × MAD, floor, cap), and at least tail × the largest sample of the window):
//
//   round      samples: the duration of each of this site's mixes that completed with no round
//              abandoned and no push-sum share missing, from the moment the mix starts until it is
//              done: the peers' round trips, their step times (a mix waits for the slowest member to
//              hand its part over, so a live straggler lengthens it) and the transfer of the model.
//              3 × median + 8 × MAD, at least twice the longest of the last 64 mixes, within 10 s to
//              1 h; 30 s (the old fixed default) until 8 mixes are measured.
//   heartbeat  samples: the gaps between consecutive heartbeats from each live member (shorter than
//              the timeout in force). 2 × median + 8 × MAD, at least twice the longest of the last
//              256 gaps, within 6 heartbeat intervals (3 s by default) to 60 s; 6 intervals until 16
//              gaps are measured.
//
// Why these numbers: a round deadline only decides how long a round waits for a member that sent
// nothing and is not (yet) known dead; a death known to membership ends the round at once. Firing
// early costs more than firing late (a round abandoned where nobody died is redone only once a view
// changes), so the factors are generous and the floor is ten seconds. A heartbeat timeout trades the
// time to notice a death against false deaths: its floor is the old default, six heartbeats; the tail
// factor keeps it above twice the longest recent silence of a live member, which on a loaded machine
// is the process waiting for a core, and the cap bounds how long a real death may go unnoticed.
#pragma once

#include <chrono>
#include <string>

#include "daemon/site_config.h"
#include "peer/adaptive_deadline.h"

namespace meridian::daemon {

// The rule of --round-timeout auto.
peer::AdaptiveDeadlineRule round_deadline_rule();
// The rule of --heartbeat-timeout auto, for config.heartbeat_interval.
peer::AdaptiveDeadlineRule heartbeat_deadline_rule(const SiteConfig& config);

// What waits other than a mixing round (the start, agreements at start, an attached trainer) count
// with: the given timeout, or auto's initial value.
std::chrono::milliseconds round_timeout_bound(const SiteConfig& config);
std::chrono::milliseconds heartbeat_timeout_bound(const SiteConfig& config);
// How long a round waits for a view this site holds that is not in force yet (daemon/federation/round_view.h):
// half the shortest round deadline the site may use (auto's floor), so that a member's round in the
// older view still finishes with this site.
std::chrono::milliseconds view_wait_bound(const SiteConfig& config);
// How long at least between two views this site takes, while running, that list a site it has not
// heard from (peer/membership.h, hearsay views): ten view waits, so that a member proposing views that
// never come into force, one after another, stalls this site's rounds a tenth of the time at most.
std::chrono::milliseconds hearsay_view_interval(const SiteConfig& config);

// The start-up line's words for both: "round timeout auto (30 s until 8 mixes are measured, then
// 10 s to 1 h), heartbeat timeout 15 s".
std::string describe_deadlines(const SiteConfig& config);

}  // namespace meridian::daemon
