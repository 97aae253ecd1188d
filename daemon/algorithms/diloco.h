// diloco: DiLoCo with Streaming DiLoCo's overlap and fragments (gossip::Diloco, gossip/diloco.h). The
// configured optimizer (--optimizer; AdamW in the paper) is the inner optimizer and runs every step;
// every H = --period steps a fragment's pseudo-gradient is averaged exactly over the view and an outer
// Nesterov step (--outer-lr, --outer-momentum) moves the global parameters. --delay is the overlap τ:
// the exchange runs during τ further inner steps and is applied with delayed compensation; auto (the
// default) chooses τ from the network and follows the view's pace (daemon/algorithms/auto_shape.h).
// --fragments F staggers F fragment syncs H/F steps apart. --compression fp16 or int8 sends the
// pseudo-gradients compressed over the direct exchange (--exchange direct sends dense ones there too;
// the default is the ring). --fragments, --outer-lr and --outer-momentum are its own options, declared
// in diloco.cc (daemon/algorithms/algorithm_option.h); the others are shared. Checkpoint sections: the
// parameters, the inner optimizer's state ("optimizer"), and the outer state "diloco-global" (θ_g) and
// "diloco-outer-momentum" (m).
#pragma once

#include "daemon/algorithms/algorithm.h"

namespace meridian::daemon::algorithms {

// diloco's shape when --period or --delay is not given. H = 32 inner steps between outer syncs: 32
// times less traffic than allreduce; the paper's H = 500 is for models whose step takes seconds.
// Without --delay the overlap τ is auto: chosen from the measured round trip and step time
// (daemon/algorithms/auto_shape.h), so that `--algo diloco` alone hides the latency it meets; until
// the network is measured it is kDilocoDefaultOverlap (at most H), which covers a crossing of a few
// steps' compute on a fast link.
inline constexpr int kDilocoDefaultInnerSteps = 32;
inline constexpr int kDilocoDefaultOverlap = 2;

const Algorithm& diloco_algorithm();

}  // namespace meridian::daemon::algorithms
