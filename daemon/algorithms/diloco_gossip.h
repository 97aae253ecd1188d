// diloco-gossip: DiLoCo whose outer average is push-sum gossip instead of an exact mean
// (gossip::Diloco with gossip::OuterAverage::kPushSum, gossip/diloco.h; docs/algorithms.md,
// "diloco-gossip"). As in diloco, the configured optimizer (--optimizer) is the inner optimizer, H =
// --inner-steps (32), τ = --overlap (2 unless given; auto as diloco's), --outer-lr and --outer-momentum
// (diloco's declarations, read by both). Every H steps each site takes the outer Nesterov step on its own
// pseudo-gradient and sends the result as one push-sum share to K = --out-peers out-peers of the directed
// exponential graph (a PushSumMixer; --compression fp16 rounds the shares); it waits for its in-peers'
// shares only, never for every site, and not at all while τ inner steps cover the crossing. One fragment
// (no --fragments), no re-average. Checkpoint sections: diloco's (the parameters, "optimizer",
// "diloco-global", "diloco-outer-momentum") and "diloco-push-sum-weight" (w).
#pragma once

#include "daemon/algorithms/algorithm.h"

namespace meridian::daemon::algorithms {

const Algorithm& diloco_gossip_algorithm();

}  // namespace meridian::daemon::algorithms
