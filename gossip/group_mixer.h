// dsync's mix: the exact mean within this site's group of the step (gossip/group_grid.h, laid out as
// the GridSpec asks: the automatic rule or ROWSxCOLS) over the view in force for the step. Groups run their ring
// all-reduces in parallel with kGroupChunk messages; a site belongs to one group per step, so its ring never sees
// another group's mail. A round that cannot finish (a group member left or died) is not redone: the site keeps its own
// values for that step, and every site keeps running in the view announced for each step, so the groups of a step
// always come from one view (RingMeanRound::Abandon::kSkip). Averaging resumes at the next step
// whose group is complete, and the re-average after the view change pulls everybody together.
#pragma once

#include <atomic>
#include <vector>

#include "gossip/group_grid.h"
#include "gossip/inbox.h"
#include "gossip/mixer.h"
#include "gossip/ring_mean_round.h"

namespace meridian::gossip {

// Thread-safety: none (communication thread only).
class GroupMixer final : public Mixer {
 public:
  // robust: optional Byzantine-robust group mean instead of the exact one (gossip/robust_options.h).
  // grid: the layout of the groups (--grid), the automatic one by default.
  GroupMixer(Inbox& inbox, RoundTimeouts timeouts = {}, RobustOptions robust = {}, GridSpec grid = {})
      : round_(inbox, timeouts, RingOptions{peer::MessageKind::kGroupChunk, true, RingOptions{}.max_piece, {}}, robust,
               RingMeanRound::Abandon::kSkip),
        grid_(grid) {}

  // `weight` is left unchanged.
  MixReport mix(std::uint64_t step, RoundTag tag, std::span<float> data, double& weight) override;

  // Rounds abandoned so far; may be read from any thread.
  std::uint64_t abandoned() const { return round_.abandoned(); }

 private:
  RingMeanRound round_;
  GridSpec grid_;
};

}  // namespace meridian::gossip
