// sgp — Stochastic Gradient Push (docs/algorithms.md), the trainer side. The site keeps the push-sum
// numerator x and weight w (initially the shared start and 1); the model the trainer runs forward and
// backward on is the de-biased z = x / w. A gradient step goes to the numerator, x ← x − w·update (the
// caller passes γ·step(g(z)) from its optimizer, whose momentum stays local; in an overlap run with
// shares in flight, x ← x − w·g·update: gossip/push_sum_step_scale.h). Mixing runs through
// DelayedMixing: D = 0 is synchronous SGP, overlap is OSGP (τ split between D and the mixer:
// gossip/osgp_split.h).
//
// The factor w is Meridian's, not docs/algorithms.md's x ← x − γ·step(g(z)); the two are the same bits
// whenever w = 1, which holds at every site of a fault-free synchronous run on the exponential graph
// (each site keeps 1/(K+1) of its weight and receives K shares of 1/(K+1)). When a fault loses mass
// (shares sent into a partition or to a peer that died), w falls below 1 and the unscaled rule would
// move z by update / w: a site that lost half its weight trained at twice the learning rate and
// diverged in a partition test (docs/reliability.md). Scaled, z moves by the update itself. In an
// overlap run the shares in flight keep w below 1 too, and w alone would slow the consensus; the gain
// g ∈ [1, 2] makes up for the mass in flight without following a lost one (gossip/push_sum_step_scale.h,
// docs/algorithms.md "The weight in an overlap run").
//
// Thread-safety: one trainer thread. Owns x; writes z into the caller's model buffer.
#pragma once

#include <functional>
#include <span>
#include <vector>

#include "gossip/delayed_mixing.h"
#include "gossip/push_sum_step_scale.h"

namespace meridian::gossip {

class PushSum {
 public:
  // Starts from x = model, w = 1. config.reaverage_every must be 0. `scale` gives the factor of the
  // update (gossip/push_sum_step_scale.h; the default is w).
  PushSum(DelayedMixingConfig config, MixChannel& channel, std::span<float> model, PushSumStepScale scale = {});

  // x ← x − update, mixes (per the config), then writes z = x / w into the model buffer.
  // Throws error::InternalError for a mis-sized update, and what MixChannel throws.
  void step(std::uint64_t k, std::span<const float> update);
  // The same with update = before − after (the model before and after the optimizer step), formed in
  // the same pass as x's update: the same float operations as step(k, before − after), one pass fewer.
  void step(std::uint64_t k, std::span<const float> before, std::span<const float> after);
  // The same with `after` the model buffer itself, which the caller's optimizer changed in place since
  // this object last wrote it (construction, a step, finish() or restore(); nothing else may write it in
  // between), and `before` recomputed as x / w, bit for bit what that last write put there: the same
  // float operations as step(k, before, model) with `before` a copy taken ahead of the optimizer, without
  // the copy.
  void step_in_place(std::uint64_t k);

  // Applies every outstanding mix and refreshes the model.
  void finish();

  // Resumes from a checkpoint (numerator, weight and weight average as numerator(), weight() and
  // weight_average() returned them; 1, the average's start, for a checkpoint without one) and refreshes
  // the model. Call between steps with no mix in flight (D = 0, or after finish()).
  // Throws error::UserError for a mis-sized numerator or a weight or average that is not finite and
  // positive.
  void restore(std::span<const float> numerator, double weight, double weight_average = 1.0);

  std::span<const float> numerator() const { return x_; }
  double weight() const { return w_; }
  // ŵ of the step scale (gossip/push_sum_step_scale.h).
  double weight_average() const { return scale_.weight_average(); }
  const DelayedMixing& mixing() const { return mixing_; }
  const PushSumStepScale& step_scale() const { return scale_; }
  PushSumStepScale& step_scale() { return scale_; }

 private:
  // The factor s of the update in x ← x − s·update (gossip/push_sum_step_scale.h), as a float. Once per
  // step: it notes w for the step scale's smoothing.
  float update_factor() { return static_cast<float>(scale_.factor(w_)); }
  // Runs the step with `update(begin, end)` applying the update to x[begin, end), fused with the mixing's
  // pass over x (DelayedMixing::StepPass) and with the model's refresh.
  void step_with(std::uint64_t k, const std::function<void(std::size_t, std::size_t)>& update);
  // model[begin, end) ← x / w.
  void refresh_model(std::size_t begin, std::size_t end);
  void refresh_model() { refresh_model(0, x_.size()); }

  std::span<float> model_;
  std::vector<float> x_;
  double w_ = 1.0;
  PushSumStepScale scale_;
  DelayedMixing mixing_;
};

}  // namespace meridian::gossip
