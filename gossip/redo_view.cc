#include "gossip/redo_view.h"

#include <string>

#include "gossip/round.h"

namespace meridian::gossip {

peer::View newest_view(const peer::Transport& transport) {
  // view_for() returns the newest view in force at a round; at the last round every view is.
  return transport.view_for(UINT64_MAX);
}

namespace {
// Calls `visit` on the views in force at some round, newest first, down to (excluding) view `id`.
template <typename Visit>
void walk_newer_than(const peer::Transport& transport, std::uint64_t id, Visit visit) {
  peer::View v = newest_view(transport);
  while (v.id > id) {
    if (!visit(v) || v.effective_round == 0) return;
    peer::View older = transport.view_for(v.effective_round - 1);
    if (older.id >= v.id) return;
    v = std::move(older);
  }
}
}  // namespace

std::optional<peer::View> next_view_after(const peer::Transport& transport, std::uint64_t id) {
  std::optional<peer::View> oldest;
  walk_newer_than(transport, id, [&](const peer::View& v) {
    oldest = v;
    return true;
  });
  return oldest;
}

bool left_out_after(const peer::Transport& transport, const peer::View& view, const std::string& name) {
  bool out = false;
  walk_newer_than(transport, view.id, [&](const peer::View& v) {
    out = !v.rank_of(name);
    return !out;
  });
  return out;
}

std::optional<peer::Message> take_unless_left_out(Inbox& inbox, const Inbox::Match& match, const peer::View& view,
                                                  const std::string& from, Clock::time_point deadline) {
  constexpr std::chrono::milliseconds kCheck{100};
  for (;;) {
    const auto until = std::min(deadline, Clock::now() + kCheck);
    auto msg = inbox.take(match, until);
    if (msg || until >= deadline || left_out_after(inbox.transport(), view, from)) return msg;
  }
}

peer::View RedoView::for_step(const peer::Transport& transport, std::uint64_t step) const {
  peer::View v = transport.view_for(step);
  if (floor_ && floor_->id > v.id) return *floor_;
  return v;
}

peer::View RedoView::after_abandon(Inbox& inbox, const peer::View& failed, std::chrono::milliseconds wait) {
  auto deadline = Clock::now() + wait;
  for (;;) {
    if (auto v = next_view_after(inbox.transport(), failed.id)) {
      floor_ = *v;
      return *v;
    }
    // Nobody was found dead, so no view will come: the round is redone where it failed.
    if (Clock::now() >= deadline) return failed;
    inbox.pump(std::chrono::milliseconds(5));
  }
}

}  // namespace meridian::gossip
