// Which view a view-based collective (AverageMixer, GroupMixer) runs a step in, across a death.
//
// Normally the view in force for the step (view_for(step)). After a round is abandoned, the mixer waits
// for the membership layer to announce a newer view and redoes the round in the oldest view newer than
// the failed one; that view then stays the floor for later steps until view_for(step) is at least as
// new. Every survivor learns the same views by membership gossip, so they redo in the same one. The
// oldest, not the newest: when a site restarts before its death was noticed, membership announces a
// view without its old incarnation and then one with the new incarnation, which starts only at that
// view's round; a redo in the newest view would wait for a site that is not there yet.
//
// When no newer view comes, nobody was found dead: the round's messages were lost (a link that dropped
// for less than the heartbeat timeout) or a member was slower than the deadline. after_abandon() then
// hands back the failed view and the mixer decides: the ring and the direct exchange redo the round
// there under a fresh attempt, or take the result from a member that completed it
// (gossip/same_view_redo.h); the masked mean keeps the site's own values for the step.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "gossip/inbox.h"
#include "peer/view.h"

namespace meridian::gossip {

// The newest view the transport knows, whatever its effective round.
peer::View newest_view(const peer::Transport& transport);

// The oldest view newer than view `id` among those in force at some round (views announced with
// increasing effective rounds are all found), or nullopt when there is none.
std::optional<peer::View> next_view_after(const peer::Transport& transport, std::uint64_t id);

// Whether some announced view newer than `view` leaves `name` out (membership found it dead, or its
// old incarnation superseded), even if a still newer view takes it back.
bool left_out_after(const peer::Transport& transport, const peer::View& view, const std::string& name);

// Takes the first message `match` accepts from `inbox`, waiting until `deadline` but no longer than it
// takes to learn that `from` will not send it: every 100 ms the wait checks whether a view newer than
// `view` leaves `from` out (it left, or was found dead) and then gives up at once. Sites that stop
// together (simulate --stop-at-target, an operator stopping them all) end at different steps, and one
// that sent its part would otherwise wait a whole round timeout for those that stopped a step earlier
// and left. nullopt when the deadline passed or `from` was left out.
std::optional<peer::Message> take_unless_left_out(Inbox& inbox, const Inbox::Match& match, const peer::View& view,
                                                  const std::string& from, Clock::time_point deadline);

// Thread-safety: none (communication thread only).
class RedoView {
 public:
  // The view to run `step` in.
  peer::View for_step(const peer::Transport& transport, std::uint64_t step) const;

  // After a round in view `failed` was abandoned: waits (pumping the inbox so mail keeps flowing) up to
  // `wait` for a view newer than `failed` to be announced, makes it the floor and returns it; when none
  // is announced by then, returns `failed` itself (see above). Never throws.
  peer::View after_abandon(Inbox& inbox, const peer::View& failed, std::chrono::milliseconds wait);

 private:
  std::optional<peer::View> floor_;
};

}  // namespace meridian::gossip
