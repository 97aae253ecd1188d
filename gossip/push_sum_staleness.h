// The in-peer shares a push-sum site still expects, per step it mixed: sgp's staleness bound τ
// (PushSumMixer) lets the mix of step k go on while the shares of steps k − τ + 1 .. k are still on
// their way, and waits only for those of steps ≤ k − τ. Each expected share remembers the view of its
// step, so a peer that a newer view leaves out is given up on by the rules of that step's graph.
//
// Bounded: a mixer that resolves (receives or gives up on) every share of steps ≤ k − τ in the mix
// of step k keeps at most τ + 1 steps here.
//
// Thread-safety: none (communication thread only).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "peer/view.h"

namespace meridian::gossip {

class OutstandingShares {
 public:
  struct Due {
    std::uint64_t step = 0;
    std::string from;
    const peer::View* view = nullptr;  // valid until the next call that changes this object
  };

  // The shares of `step` from `senders` (members of `view`) are now expected. Replaces what was
  // expected for that step (a step is mixed once).
  void expect(std::uint64_t step, const peer::View& view, std::vector<std::string> senders);

  // The share of `step` from `from` has been added. Returns whether it was expected (false for a share
  // of a step never mixed here, or one already given up on).
  bool arrived(std::uint64_t step, const std::string& from);

  // The oldest expected share of a step ≤ `through` (in the order the senders were given), or nullopt.
  std::optional<Due> oldest_through(std::uint64_t through) const;

  // Gives up on a share (missing: the round deadline passed, or a newer view left its sender out).
  // Should it still arrive, it is added as a late share by whoever takes it; it is no longer awaited.
  void give_up(std::uint64_t step, const std::string& from) { arrived(step, from); }

  // Shares still expected, over all steps.
  std::size_t size() const;

 private:
  struct Step {
    peer::View view;
    std::vector<std::string> senders;
  };
  std::map<std::uint64_t, Step> steps_;
};

}  // namespace meridian::gossip
