// A site's own update scale: how far its own vector moves between two mixes of the same tag (the local
// training since the last mix for parameters, the change of the gradient for gradient averages). Robust
// aggregation (gossip/robust_options.h) clips other sites' contributions against it, so the threshold
// follows the training instead of being a constant someone has to tune per model.
//
// The scale is an exponential moving average of ‖input(k) − output(k−1)‖₂ over the mixes of one tag.
// Thread-safety: none (communication thread only).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <vector>

namespace meridian::gossip {

class UpdateScale {
 public:
  // Notes the input of a mix of `tag` and returns the scale to clip this mix against; nullopt before
  // the second mix of the tag (no previous output to measure from) or when the vector size changed.
  std::optional<double> on_input(std::uint32_t tag, std::span<const float> input);
  // Remembers the output of the mix of `tag`, the reference the next input is measured from.
  void on_output(std::uint32_t tag, std::span<const float> output);

 private:
  struct State {
    std::vector<float> last_output;
    std::optional<double> scale;
  };
  std::map<std::uint32_t, State> states_;
};

}  // namespace meridian::gossip
