#include "daemon/federation/round_view.h"

#include <algorithm>
#include <optional>
#include <thread>

#include <spdlog/spdlog.h>

namespace meridian::daemon {

peer::View RoundView::for_round(std::uint64_t k, const std::atomic<bool>& stop) {
  using Clock = std::chrono::steady_clock;
  std::optional<peer::View> awaited = transport_.view_awaited(k);
  if (!awaited || awaited->id <= waited_through_) return transport_.view_for(k);
  const auto deadline = Clock::now() + bound_;
  // A newer view may come to be awaited while this one is (a pace for it, a later change): the wait
  // goes on for it within the same bound, and every view it covered counts as waited for.
  while (awaited && !stop && Clock::now() < deadline) {
    waited_through_ = std::max(waited_through_, awaited->id);
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    awaited = transport_.view_awaited(k);
  }
  const peer::View view = transport_.view_for(k);
  if (awaited && !stop) {
    waited_through_ = std::max(waited_through_, awaited->id);
    given_up_.inc();
    spdlog::warn("round {}: view {} ({} sites) is still not in force after {} ms: round {} and the next run in view "
                 "{}, in force here, until it is",
                 k, awaited->id, awaited->size(), bound_.count(), k, view.id);
  }
  return view;
}

}  // namespace meridian::daemon
