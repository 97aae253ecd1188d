// How sgp's overlap bound τ (--tau: a site runs at most τ steps ahead of the oldest share it expects)
// is split between the communication thread's PushSumMixer (staleness bound) and the trainer's
// DelayedMixing (delay D, overlap mode).
//
// τ ≥ 1: the mixer waits only for shares τ − 1 steps old and the trainer folds each mix in at most one
// step later (D = 1). A share sent by the mix of step s is then added by the mix of step s + τ − 1 at
// the latest and is in the model after step s + τ: total staleness τ, the bound --tau promises, as it
// was when the trainer took D = τ and the mixer waited for its own step. Why not D = τ any more: the
// mixer waiting on its own step's shares serves mixes one after the other, each costing a one-way
// latency, so τ only queued them; and delayed compensation beyond D = 2 needs the damped mix step
// α = 1/D (docs/algorithms.md), which slows consensus, while push-sum absorbs late shares with α = 1
// (a share in flight is mass on the link, added whenever it lands). D = 1 rather than 0 keeps the
// mixer's own work (scaling, sending, adding) off the trainer's path.
// τ = 0: the synchronous algorithm, both parts 0.
#pragma once

#include <cstdint>

namespace meridian::gossip {

struct OsgpSplit {
  std::uint64_t mixer_staleness = 0;  // PushSumMixer's staleness bound
  std::uint32_t delay = 0;            // DelayedMixingConfig::delay (overlap mode)
};

constexpr OsgpSplit osgp_split(std::uint32_t tau) { return tau == 0 ? OsgpSplit{} : OsgpSplit{tau - 1, 1}; }

}  // namespace meridian::gossip
