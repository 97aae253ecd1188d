#include "gossip/average_mixer.h"

namespace meridian::gossip {

MixReport AverageMixer::mix(std::uint64_t step, RoundTag tag, std::span<float> data, double&) {
  return round_.run(step, tag, data, [](const peer::View& view, std::size_t, std::uint64_t) { return view.members; });
}

}  // namespace meridian::gossip
