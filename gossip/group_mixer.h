// dsync's mix: the exact mean within this site's group of the step (gossip/group_grid.h) over the view
// in force for the step. Groups run their ring all-reduces in parallel with kGroupChunk messages; a
// site belongs to one group per step, so its ring never sees another group's mail. Abandoned rounds
// are redone in the next view exactly as AverageMixer does.
#pragma once

#include <atomic>
#include <vector>

#include "gossip/group_grid.h"
#include "gossip/inbox.h"
#include "gossip/mixer.h"
#include "gossip/redo_view.h"
#include "gossip/ring_allreduce.h"

namespace meridian::gossip {

// Thread-safety: none (communication thread only).
class GroupMixer final : public Mixer {
 public:
  GroupMixer(Inbox& inbox, RoundTimeouts timeouts = {}) : inbox_(inbox), ring_(inbox), timeouts_(timeouts) {}

  // `weight` is left unchanged.
  MixReport mix(std::uint64_t step, RoundTag tag, std::span<float> data, double& weight) override;

  // Rounds abandoned so far; may be read from any thread.
  std::uint64_t abandoned() const { return abandoned_.load(); }

 private:
  Inbox& inbox_;
  RingAllReduce ring_;
  RoundTimeouts timeouts_;
  std::vector<float> backup_;
  RedoView redo_;
  std::atomic<std::uint64_t> abandoned_{0};
};

}  // namespace meridian::gossip
