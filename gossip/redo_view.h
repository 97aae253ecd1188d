// Which view a view-based collective (AverageMixer, GroupMixer) runs a step in, across a death.
//
// Normally the view in force for the step (view_for(step)). After a round is abandoned, the mixer waits
// for the membership layer to announce any newer view and redoes the round in it; that view then
// stays the floor for later steps until view_for(step) is at least as new. Every survivor learns the
// same views by membership gossip, so they redo in the same one.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>

#include "gossip/inbox.h"
#include "peer/view.h"

namespace meridian::gossip {

// The newest view the transport knows, whatever its effective round.
peer::View newest_view(const peer::Transport& transport);

// Thread-safety: none (communication thread only).
class RedoView {
 public:
  // The view to run `step` in.
  peer::View for_step(const peer::Transport& transport, std::uint64_t step) const;

  // After a round in view `failed` was abandoned: waits (pumping the inbox so mail keeps flowing) until a
  // view newer than `failed` is announced, makes it the floor and returns it. Throws MixError after `wait`.
  peer::View after_abandon(Inbox& inbox, const peer::View& failed, std::chrono::milliseconds wait);

 private:
  std::optional<peer::View> floor_;
};

}  // namespace meridian::gossip
