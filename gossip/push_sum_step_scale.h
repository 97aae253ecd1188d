// The factor sgp multiplies the optimizer's update by before subtracting it from the push-sum numerator
// (gossip/push_sum.h, daemon/backend/backend_push_sum.h): x ← x − s·update, which moves the site's model
// z = x / w by (s / w)·update and the consensus (Σx plus the mass in flight, over the total mass n) by
// Σ_j s_j·update_j / n.
//
// Without shares in flight (a synchronous run, and τ = 1, whose mixer waits for every share of its own
// step): s = w, so z moves by the update itself whatever w is. In a fault-free run w = 1 and this is
// docs/algorithms.md's x ← x − update bit for bit; when a fault loses mass (a partition, a dead peer) w stays
// below 1 and the unscaled rule would train that site at 1/w times the learning rate (it diverged at
// w = 1/2: docs/reliability.md).
//
// With shares in flight (OSGP, τ ≥ 2: the mixer waits only for shares τ − 1 steps old) a site's w sits
// below 1 even without a fault (0.3–0.9 measured over 100 ms links), and s = w slows the consensus to
// Σ w_j·update_j / n. Here s = w·g with the gain g = clamp(1 / ŵ, 1, G), ŵ an exponential average of w
// over about 1 / kSmoothing steps (the weight the site holds on average, home mass against mass in
// flight). While each w_j stays near ŵ_j every site adds about one unit of update per step to the
// consensus (Σ_j w_j·g_j ≈ n), the rate of a synchronous run, and z moves by g·update:
//   - G = min(kMaxGain, 1 + (τ − 1)·K / (K + 1)). The second term is what shares in flight can account
//     for: each step a site sends K / (K + 1) of its weight and the mixer waits for shares once they
//     are τ − 1 steps old, so in a steady state where the sites hold alike at most (τ − 1)·K / (K + 1)
//     times the weight a site holds is in flight towards it. A weight lower than that is mass lost (or
//     a site running ahead of its peers), which the gain does not chase.
//   - kMaxGain bounds the step of z whatever the staleness: the unscaled rule, which moves z by
//     update / w, diverged at w = 0.29 (τ = 8).
//   - So a permanent mass loss raises a site's learning rate by at most G ≤ kMaxGain, and not at all
//     for τ = 1; the per-step jitter of w as shares land does not reach the step (ŵ is smoothed); ŵ
//     starts at 1, so the gain builds up over the first tens of steps.
// docs/algorithms.md ("The weight in an overlap run") has the measurements.
//
// Thread-safety: none (the trainer thread).
#pragma once

#include <cstddef>
#include <cstdint>

namespace meridian::gossip {

class PushSumStepScale {
 public:
  // The bound on G: z moves by at most this many times the update.
  static constexpr double kMaxGain = 2.0;
  // ŵ ← ŵ + kSmoothing·(w − ŵ) per step: long against the few steps a share spends in flight (so ŵ is
  // the level w sits at, not where it is between two landings), short against a run.
  static constexpr double kSmoothing = 1.0 / 32.0;

  // No gain (G = 1): s = w.
  PushSumStepScale() = default;
  // For a mixer that waits for shares once they are `mixer_staleness` steps old (τ − 1:
  // gossip/osgp_split.h), sending to `out_peers` (K ≥ 1) per step.
  PushSumStepScale(std::uint64_t mixer_staleness, std::size_t out_peers)
      : bound_(gain_bound(mixer_staleness, out_peers)) {}

  // G above.
  static double gain_bound(std::uint64_t mixer_staleness, std::size_t out_peers);

  // The factor s for a step taken with weight w (finite, positive); notes w for the next steps.
  double factor(double w);

  // ŵ, for a checkpoint: a restarted site resumes with the gain it had instead of building it up again
  // over the first tens of steps, during which its updates would reach the consensus slower.
  double weight_average() const { return smoothed_; }
  // Resumes from a checkpoint's ŵ (what weight_average() returned). Throws error::UserError unless
  // it is finite and positive.
  void resume(double weight_average);

  double bound() const { return bound_; }
  // A new mixer staleness from this step on (an automatic τ, daemon/algorithms/auto_shape.h): G follows
  // it; ŵ carries on.
  void set_mixer_staleness(std::uint64_t mixer_staleness, std::size_t out_peers) {
    bound_ = gain_bound(mixer_staleness, out_peers);
  }
  // The gain g the last factor() used (1 before the first step and whenever G = 1).
  double gain() const { return gain_; }

 private:
  // g = clamp(1 / ŵ, 1, G), and 1 when G = 1: what factor() and resume() derive from ŵ.
  double gain_from_average() const;

  double bound_ = 1.0;     // G
  double smoothed_ = 1.0;  // ŵ
  double gain_ = 1.0;
};

}  // namespace meridian::gossip
