#include "gossip/redo_view.h"

#include <string>

#include "gossip/round.h"

namespace meridian::gossip {

peer::View newest_view(const peer::Transport& transport) {
  // view_for() returns the newest view in force at a round; at the last round every view is.
  return transport.view_for(UINT64_MAX);
}

peer::View RedoView::for_step(const peer::Transport& transport, std::uint64_t step) const {
  peer::View v = transport.view_for(step);
  if (floor_ && floor_->id > v.id) return *floor_;
  return v;
}

peer::View RedoView::after_abandon(Inbox& inbox, const peer::View& failed, std::chrono::milliseconds wait) {
  auto deadline = Clock::now() + wait;
  for (;;) {
    peer::View v = newest_view(inbox.transport());
    if (v.id > failed.id) {
      floor_ = v;
      return v;
    }
    if (Clock::now() >= deadline)
      throw MixError("no view newer than " + std::to_string(failed.id) + " was announced to redo an abandoned round in");
    inbox.pump(std::chrono::milliseconds(5));
  }
}

}  // namespace meridian::gossip
