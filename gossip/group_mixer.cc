#include "gossip/group_mixer.h"

#include <algorithm>
#include <string>


namespace meridian::gossip {

MixReport GroupMixer::mix(std::uint64_t step, RoundTag tag, std::span<float> data, double&) {
  const auto tag_value = static_cast<std::uint32_t>(tag);
  const auto kind = peer::MessageKind::kGroupChunk;
  inbox_.discard_if([&](const peer::Message& m) { return m.kind == kind && m.tag == tag_value && m.round < step; });
  backup_.assign(data.begin(), data.end());
  MixReport report;
  peer::View view = redo_.for_step(inbox_.transport(), step);
  for (;;) {
    auto rank = view.rank_of(inbox_.transport().self());
    if (!rank)
      throw MixError("site '" + inbox_.transport().self() + "' is not in view " + std::to_string(view.id) +
                     " for step " + std::to_string(step));
    std::vector<std::string> members;
    for (std::size_t r : group_at(group_grid_for(view.size()), *rank, step)) members.push_back(view.at(r));
    RingOptions options;
    options.kind = kind;
    options.average = true;
    auto status = ring_.run(members, Round{view.id, step, tag_value}, data, Clock::now() + timeouts_.round, options);
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
