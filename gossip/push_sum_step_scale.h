// The factor sgp multiplies the optimizer's update by before subtracting it from the push-sum numerator
// (gossip/push_sum.h, daemon/backend_push_sum.h): x ← x − s·update, which moves the site's model
// z = x / w by (s / w)·update and the consensus (Σx plus the mass in flight, over the total mass n) by
// Σ_j s_j·update_j / n.
//
// Synchronous run (no overlap): s = w, so z moves by the update itself whatever w is. In a fault-free
// run w = 1 and this is DESIGN.md §1's x ← x − update bit for bit; when a fault loses mass (a partition,
// a dead peer) w stays below 1 and the unscaled rule would train that site at 1/w times the learning
// rate (it diverged at w = 1/2: docs/reliability.md).
//
// Overlap run (OSGP, τ ≥ 1): the shares a site sent that have not landed are mass on the links, so a
// site's w sits below 1 even without a fault (0.3–0.9 measured at τ = 3..8 over 100 ms links), and
// s = w slows the consensus to Σ w_j·update_j / n. Here s = w·g with the gain g = min(1 / ŵ, kMaxGain),
// ŵ an exponential average of w over about 1 / kSmoothing steps: the weight the site holds on average,
// home mass against mass in flight. Then every site adds about one unit of update per step to the
// consensus (Σ_j w_j·g_j ≈ n while each w_j stays near ŵ_j), the consensus rate a synchronous run has,
// and z moves by g·update, never more than kMaxGain times the update: the per-step jitter of w as
// shares land does not reach the step (the unscaled rule moves z by update / w, which diverged at
// w = 0.29), and a mass loss that is permanent raises the site's learning rate by at most kMaxGain
// however much mass it lost. ŵ starts at 1, so the gain builds up over the first tens of steps.
// docs/algorithms.md ("The weight in an overlap run") has the measurements.
//
// Thread-safety: none (the trainer thread).
#pragma once

namespace meridian::gossip {

class PushSumStepScale {
 public:
  // The bound on g: z moves by at most this many times the update.
  static constexpr double kMaxGain = 2.0;
  // ŵ ← ŵ + kSmoothing·(w − ŵ) per step: long against the few steps a share spends in flight (so ŵ is
  // the level w sits at, not where it is between two landings), short against a run.
  static constexpr double kSmoothing = 1.0 / 32.0;

  // `overlap`: the mixing overlaps the training (DelayedMixingConfig with overlap and delay ≥ 1).
  explicit PushSumStepScale(bool overlap) : overlap_(overlap) {}

  // The factor s for a step taken with weight w (finite, positive); notes w for the next steps.
  double factor(double w);

  // The gain g the last factor() used (1 in a synchronous run and before the first step).
  double gain() const { return gain_; }

 private:
  bool overlap_;
  double smoothed_ = 1.0;  // ŵ
  double gain_ = 1.0;
};

}  // namespace meridian::gossip
