#include "gossip/average_mixer.h"

#include <algorithm>
#include <string>

namespace meridian::gossip {

MixReport AverageMixer::mix(std::uint64_t step, RoundTag tag, std::span<float> data, double&) {
  const auto tag_value = static_cast<std::uint32_t>(tag);
  // Rounds of one tag run in increasing step order on every site, so mail of an older step of this
  // tag is what an abandoned attempt left behind.
  inbox_.discard_if([&](const peer::Message& m) {
    return m.kind == peer::MessageKind::kReduceChunk && m.tag == tag_value && m.round < step;
  });
  backup_.assign(data.begin(), data.end());
  MixReport report;
  peer::View view = redo_.for_step(inbox_.transport(), step);
  for (;;) {
    if (!view.rank_of(inbox_.transport().self()))
      throw MixError("site '" + inbox_.transport().self() + "' is not in view " + std::to_string(view.id) +
                     " for step " + std::to_string(step));
    Round round{view.id, step, tag_value};
    RingOptions options;
    options.average = true;
    options.max_piece = max_piece_;
    auto status = ring_.run(view.members, round, data, Clock::now() + timeouts_.round, options);
    inbox_.discard_if([&](const peer::Message& m) {
      return m.kind == peer::MessageKind::kReduceChunk && m.round == step && m.tag == tag_value &&
             m.view_id <= view.id;
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
