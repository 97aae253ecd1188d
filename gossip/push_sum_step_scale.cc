#include "gossip/push_sum_step_scale.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "error/error.h"

namespace meridian::gossip {

double PushSumStepScale::gain_bound(std::uint64_t mixer_staleness, std::size_t out_peers) {
  const double k = static_cast<double>(std::max<std::size_t>(out_peers, 1));
  return std::min(kMaxGain, 1.0 + static_cast<double>(mixer_staleness) * k / (k + 1.0));
}

double PushSumStepScale::factor(double w) {
  // G = 1 leaves s = w bit for bit (gain_ stays 1).
  if (bound_ <= 1.0) return w;
  smoothed_ += kSmoothing * (w - smoothed_);
  gain_ = gain_from_average();
  return w * gain_;
}

void PushSumStepScale::resume(double weight_average) {
  if (!std::isfinite(weight_average) || weight_average <= 0.0)
    throw error::UserError("sgp: checkpoint push-sum weight average " + std::to_string(weight_average) +
                           " is not positive");
  smoothed_ = weight_average;
  gain_ = gain_from_average();
}

double PushSumStepScale::gain_from_average() const {
  return bound_ <= 1.0 ? 1.0 : std::clamp(1.0 / smoothed_, 1.0, bound_);
}

}  // namespace meridian::gossip
