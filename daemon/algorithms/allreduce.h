// allreduce: every step's gradient averaged over the view by the ring all-reduce
// (gossip::average_now, gossip/ring_allreduce.h), then the configured optimizer. After every view
// change the parameters and optimizer state are re-averaged as one tensor, so a site that rejoins
// from an older checkpoint comes back bit-identical to the others.
#pragma once

#include "daemon/algorithms/algorithm.h"

namespace meridian::daemon::algorithms {

const Algorithm& allreduce_algorithm();

}  // namespace meridian::daemon::algorithms
