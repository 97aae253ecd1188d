#include "gossip/ring_mean_round.h"

#include <algorithm>

namespace meridian::gossip {

MixReport RingMeanRound::run(std::uint64_t step, RoundTag tag, std::span<float> data, const GroupOf& group_of) {
  const auto tag_value = static_cast<std::uint32_t>(tag);
  const auto kind = options_.kind;
  // Rounds of one tag run in increasing step order on every site, so mail of an older step of this
  // tag is what an abandoned attempt left behind.
  inbox_.discard_if([&](const peer::Message& m) { return m.kind == kind && m.tag == tag_value && m.round < step; });
  backup_.assign(data.begin(), data.end());
  MixReport report;
  peer::View view = redo_.for_step(inbox_.transport(), step);
  for (;;) {
    const auto rank = view.rank_of(inbox_.transport().self());
    if (!rank)
      throw MixError("site '" + inbox_.transport().self() + "' is not in view " + std::to_string(view.id) +
                     " for step " + std::to_string(step));
    const auto group = group_of(view, *rank, step);
    const Round round{view.id, step, tag_value};
    const auto deadline = Clock::now() + timeouts_.round;
    const auto status = robust_ ? robust_->run(group, round, data, deadline, kind)
                                : ring_.run(group, round, data, deadline, options_);
    inbox_.discard_if([&](const peer::Message& m) {
      return m.kind == kind && m.round == step && m.tag == tag_value && m.view_id <= view.id;
    });
    if (status == RoundStatus::kCompleted) {
      report.view_id = view.id;
      return report;
    }
    ++report.abandoned;
    ++abandoned_;
    std::copy(backup_.begin(), backup_.end(), data.begin());
    view = redo_.after_abandon(inbox_, view, timeouts_.view_change);
  }
}

}  // namespace meridian::gossip
