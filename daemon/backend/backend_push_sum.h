// sgp's trainer side (gossip/push_sum.h) with the push-sum numerator x in the model's backend memory, for
// a device backend: the optimizer's displacement is taken off x, the scaled numerator z = x / w is
// written into the model, and the delayed mixing snapshots x and applies its corrections through
// daemon/backend/backend_parameters.h, all with the backend's element-wise push-sum operations
// (models/elementwise_math.h). Only the snapshot (device → host) and the mixed result (host → device)
// cross the bus; the weight w stays on the host. On a GPU the snapshot is read in the background
// (daemon/backend/async_parameter_copy.h), so the trainer calls before_update() before the next step writes x.
// On the CPU the daemon keeps using gossip::PushSum.
//
// Rounding: z = x · (1/w) in float, where PushSum divides in double; both are within an ulp of x / w.
//
// Ownership: borrows the model and the channel, which must outlive it. Thread safety: the trainer thread
// only. Throws what the backend and MixChannel throw.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "daemon/backend/backend_parameters.h"
#include "gossip/delayed_mixing.h"
#include "gossip/push_sum_step_scale.h"
#include "models/backend_buffer.h"
#include "models/model.h"

namespace meridian::daemon {

class BackendPushSum {
 public:
  // Starts from x = the model's parameters, w = 1. config.reaverage_every must be 0.
  // `scale` as for gossip::PushSum.
  BackendPushSum(gossip::DelayedMixingConfig config, gossip::MixChannel& channel, models::Model& model,
                 gossip::PushSumStepScale scale = {});

  // x ← x − s·(before − z), s the factor of gossip/push_sum_step_scale.h (w when no share is in
  // flight), with `before` (backend memory, one value per parameter) the model's z before the optimizer
  // step and z the model now; `before` is overwritten. Then mixes and writes z = x / w.
  void step(std::uint64_t k, float* before);
  // Hands the last step's background snapshot to the communication thread; call before the optimizer
  // update of the next step (and so before step(), which writes x). Does nothing without one.
  void before_update() { mixing_.before_update(); }
  // Applies every outstanding mix and refreshes the model.
  void finish();
  // As gossip::PushSum::restore: throws error::UserError for a mis-sized numerator or a weight or
  // weight average that is not finite and positive.
  void restore(std::span<const float> numerator, double weight, double weight_average = 1.0);

  // A host copy of x, valid until the next call.
  std::span<const float> numerator();
  double weight() const { return w_; }
  double weight_average() const { return scale_.weight_average(); }
  const gossip::DelayedMixing& mixing() const { return mixing_; }
  gossip::PushSumStepScale& step_scale() { return scale_; }

 private:
  void refresh_model();

  models::Model& model_;
  models::BackendBuffer<float> x_;  // (n) the numerator, backend memory
  double w_ = 1.0;
  gossip::PushSumStepScale scale_;
  BackendParameters store_;
  gossip::DelayedMixing mixing_;
  std::vector<float> host_x_;  // (n) for numerator()
};

}  // namespace meridian::daemon
