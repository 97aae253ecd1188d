#include "gossip/group_mixer.h"

namespace meridian::gossip {

MixReport GroupMixer::mix(std::uint64_t step, RoundTag tag, std::span<float> data, double&) {
  return round_.run(step, tag, data, [this](const peer::View& view, std::size_t rank, std::uint64_t at) {
    std::vector<std::string> members;
    for (std::size_t r : group_at(group_grid_for(view.size(), grid_), rank, at)) members.push_back(view.at(r));
    return members;
  });
}

}  // namespace meridian::gossip
