#include "gossip/push_sum_step_scale.h"

#include <algorithm>

namespace meridian::gossip {

double PushSumStepScale::factor(double w) {
  if (!overlap_) return w;
  smoothed_ += kSmoothing * (w - smoothed_);
  gain_ = std::min(1.0 / smoothed_, kMaxGain);
  return w * gain_;
}

}  // namespace meridian::gossip
