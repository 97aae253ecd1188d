// sgp: stochastic gradient push (gossip::PushSum, gossip/push_sum.h) with overlap τ (--tau) and K
// out-peers (--out-peers). The configured optimizer runs on the de-biased parameters z; its
// displacement goes to the push-sum numerator x. Momentum stays local, as in the paper. Checkpoint
// sections: the numerator as the parameters, the optimizer state, the weight w and its running average
// (gossip/push_sum_step_scale.h).
#pragma once

#include "daemon/algorithms/algorithm.h"

namespace meridian::daemon::algorithms {

const Algorithm& sgp_algorithm();

}  // namespace meridian::daemon::algorithms
