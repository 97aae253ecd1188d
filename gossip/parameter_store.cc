#include "gossip/parameter_store.h"

#include <algorithm>

namespace meridian::gossip {

void HostParameters::read(float* out) { std::copy(params_.begin(), params_.end(), out); }

void HostParameters::assign(const float* in) { std::copy(in, in + params_.size(), params_.begin()); }

void HostParameters::compensate(const float* mixed, const float* snapshot, float step) {
  const std::size_t n = params_.size();
  // step = 1 is the plain rule of docs/algorithms.md; its own loop spares the multiplication.
  if (step == 1.0f) {
    for (std::size_t i = 0; i < n; ++i) params_[i] += mixed[i] - snapshot[i];
  } else {
    for (std::size_t i = 0; i < n; ++i) params_[i] += step * (mixed[i] - snapshot[i]);
  }
}

}  // namespace meridian::gossip
