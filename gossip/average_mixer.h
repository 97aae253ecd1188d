// Exact mean over every member of the view in force for the step, by ring all-reduce: the gradient
// average of allreduce and dts, and the periodic re-average of dts and dsync.
//
// Rounds and faults: a round runs in view_for(step). When it cannot finish by its deadline it is
// abandoned (counted), the input is restored, and the mixer waits until the membership layer has
// announced a newer view (any effective round: membership announces views ahead, but the stuck step
// cannot wait for that), then redoes the round among that view's members. Later steps keep using that
// view until view_for(step) is at least as new, so one death costs one deadline, not one per step. The redo is
// consistent when the dead site dropped out before the round started; a site that dies halfway through the all-gather
// can leave some survivors with a finished round and others without, which the re-average after every view change
// repairs for dts and dsync.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "gossip/inbox.h"
#include "gossip/mixer.h"
#include "gossip/ring_mean_round.h"

namespace meridian::gossip {

// Thread-safety: none (communication thread only). Keeps its buffers between mixes.
class AverageMixer final : public Mixer {
 public:
  // robust: optional Byzantine-robust mean instead of the exact one (gossip/robust_options.h).
  AverageMixer(Inbox& inbox, RoundTimeouts timeouts = {}, std::size_t max_piece = RingOptions{}.max_piece,
               RobustOptions robust = {})
      : round_(inbox, timeouts, RingOptions{peer::MessageKind::kReduceChunk, true, max_piece, {}}, robust) {}

  // `weight` is left unchanged.
  MixReport mix(std::uint64_t step, RoundTag tag, std::span<float> data, double& weight) override;

  // Rounds abandoned so far; may be read from any thread.
  std::uint64_t abandoned() const { return round_.abandoned(); }

 private:
  RingMeanRound round_;
};

}  // namespace meridian::gossip
