// dsync: an optimizer step, then the exact mean within this step's group of a grid (--grid,
// gossip/group_grid.h: rows on even steps, columns on odd ones), applied D = --delay steps late with
// delayed compensation (gossip/delayed_mixing.h), and an exact re-average every --reaverage-every steps.
#pragma once

#include "daemon/algorithms/algorithm.h"

namespace meridian::daemon::algorithms {

const Algorithm& dsync_algorithm();

}  // namespace meridian::daemon::algorithms
