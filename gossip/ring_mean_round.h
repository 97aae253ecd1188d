// The exact mean of a tensor over a group of the view in force for a step, by ring all-reduce, with
// the abandon-and-redo rule of docs/algorithms.md: a round that misses its deadline is abandoned (counted),
// its input restored, and redone in the newer view the membership layer announces for the survivors.
// AverageMixer (the whole view) and GroupMixer (dsync's row or column) differ only in the group they
// pick and the message kind their rings use; both run their rounds through this.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "gossip/inbox.h"
#include "gossip/mixer.h"
#include "gossip/redo_view.h"
#include "gossip/robust_group_mean.h"
#include "gossip/robust_options.h"
#include "gossip/ring_allreduce.h"
#include "gossip/same_view_redo.h"

namespace meridian::gossip {

// Thread-safety: none (communication thread only), except abandoned(). Keeps its buffers between
// rounds. Does not own the inbox, which must outlive it.
class RingMeanRound {
 public:
  // What a round that cannot finish in its view turns into. kRedo: redone in the next announced view
  // (AverageMixer: every member of the view is in the one group, so all survivors redo together).
  // kSkip: this site keeps its own values for the step and stays in the view in force (GroupMixer: a
  // step's groups are disjoint, so the groups without the departed member finish in the old view,
  // and a redo of the others in the new view, whose groups mix members of both, could never finish).
  enum class Abandon { kRedo, kSkip };

  // The members (ascending ring order, including `rank`'s own name) averaged with `rank` at `step`.
  using GroupOf = std::function<std::vector<std::string>(const peer::View& view, std::size_t rank, std::uint64_t step)>;

  // With robust.enabled, rounds run through RobustGroupMean (gossip/robust_group_mean.h) instead of the ring.
  RingMeanRound(Inbox& inbox, RoundTimeouts timeouts, RingOptions ring_options, RobustOptions robust = {},
                Abandon abandon = Abandon::kRedo)
      : inbox_(inbox),
        ring_(inbox),
        timeouts_(timeouts),
        options_(ring_options),
        abandon_(abandon),
        same_view_(inbox, ring_options.kind) {
    options_.average = true;
    if (robust.enabled) robust_.emplace(inbox, robust);
  }

  // Replaces `data` by its mean over group_of(view, rank, step). When this site is not in the view it
  // sits the round out (MixReport::sat_out, `data` unchanged). With kRedo, a round abandoned where no
  // newer view comes (nobody was found dead: gossip/redo_view.h) is redone in the same view under a
  // fresh attempt (gossip/same_view_redo.h), at most SameViewRedo::kMaxAttempts times; a member that
  // completed it (in any attempt) hands over its result instead, when this site asks for it: after
  // an abandon, and at once when a peer has already moved past the step. Either way every site ends
  // the round with the same bits. When neither comes, the site keeps its own values for the step, as
  // with kSkip. This site answers such requests for the last round it completed while it waits in
  // later rounds and when it starts one.
  MixReport run(std::uint64_t step, RoundTag tag, std::span<float> data, const GroupOf& group_of);

  // Rounds abandoned so far; may be read from any thread.
  std::uint64_t abandoned() const { return abandoned_.load(); }

 private:
  Inbox& inbox_;
  RingAllReduce ring_;
  std::optional<RobustGroupMean> robust_;
  RoundTimeouts timeouts_;
  RingOptions options_;
  Abandon abandon_;
  std::vector<float> backup_;
  RedoView redo_;
  SameViewRedo same_view_;
  std::atomic<std::uint64_t> abandoned_{0};
};

}  // namespace meridian::gossip
