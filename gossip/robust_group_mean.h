// The robust replacement for a group's ring all-reduce (gossip/robust_options.h): every member sends
// its whole vector to every other member of the group, then each combines what it gathered by
// coordinate-wise trimmed mean (group of at least 2·trim + 1; every member then ends with the same
// bits) or, in smaller groups, by the mean of its own vector and the others' clipped against its own
// update scale. Costs (g − 1) whole vectors sent per member instead of the ring's 2(g − 1)/g.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "gossip/inbox.h"
#include "gossip/robust_options.h"
#include "gossip/round.h"
#include "gossip/update_scale.h"
#include "peer/message.h"

namespace meridian::gossip {

// Thread-safety: none (communication thread only). Keeps its buffers and the update scale between rounds.
class RobustGroupMean {
 public:
  // The phase gathered vectors carry, far from the ring's phases (< 2 × group size).
  static constexpr std::uint32_t kGatherPhase = 1u << 30;

  RobustGroupMean(Inbox& inbox, RobustOptions options) : inbox_(inbox), options_(options) {}

  // Replaces `data` by the robust mean over `group` (ring order does not matter; every member passes
  // the same list). Returns kAbandoned when a member's vector did not arrive by `deadline` (then `data`
  // is unchanged). Throws error::InternalError if this site is not in `group`.
  RoundStatus run(const std::vector<std::string>& group, const Round& round, std::span<float> data,
                  Clock::time_point deadline, peer::MessageKind kind);

  // Other members' vectors cut back by clipping so far (a measure of how often the gate closed).
  std::uint64_t clipped() const { return clipped_; }

 private:
  Inbox& inbox_;
  RobustOptions options_;
  UpdateScale scale_;
  std::vector<std::vector<float>> gathered_;
  std::vector<float> difference_;
  std::vector<double> sum_;
  std::uint64_t clipped_ = 0;
};

}  // namespace meridian::gossip
