// Delayed compensation for parameter mixing (docs/algorithms.md), the trainer side of sgp and dsync: after
// the local optimizer step s the trainer snapshots x_s (parameters, then normalization statistics, and
// the push-sum weight if any) and hands it to the communication thread, which returns the mixed m_s.
// At step s + D the trainer applies x ← x + (m_s − x_s), keeping the local progress made since s.
// D = 0 is the plain algorithm: x ← m_s right after the step.
//
// Stability: the rule as written (mix_step α = 1) converges for D = 1, is marginal at D = 2, and fails beyond: without
// gradients a direction the mix removes entirely evolves as x_{k+1} = x_k − α·x_{k+1−D}, whose
// characteristic polynomial z^D − z^(D−1) + α has roots outside the unit circle for α = 1, D >= 3
// (dsync on a 2×3 grid oscillates at D = 3 and diverges at D = 5). Use α ≈ 1/D for larger delays:
// x ← x + α·(m_s − x_s). docs/algorithms.md has the derivation.
//
// Overlap mode (sgp's OSGP): a result is applied as soon as it is there, and at the latest at s + D,
// so the site never runs more than D steps ahead of the oldest mix it still expects (sgp adds the
// mixer's staleness bound to that: gossip/osgp_split.h).
//
// Re-averaging (dsync; not with a push-sum weight): at every step that is a multiple of
// `reaverage_every` (0: never; absolute step numbers, so a site resuming mid-run agrees) and after
// every change of the view announced for the step (MixReport::scheduled_view_id, the same on every
// site), including the first view a site sees (which pulls a starting or resuming site in), all
// outstanding mixes are applied and x is replaced by its exact mean over the view. Optimizer state
// (momentum) is never mixed: it is not in the snapshot.
//
// Background snapshots (D > 0 over a store whose background_read() is true, i.e. a GPU): after_step(k)
// only starts the snapshot's copy; before_update(), which the trainer calls before the optimizer update
// of step k + 1 writes the parameters, guards those writes behind the copy and hands the snapshot to the
// communication thread. The copy thus runs alongside step k + 1's forward and backward pass. The values
// mixed are the same as with a synchronous read (x_k, after step k's compensations); only the hand-off
// is later, by one forward/backward pass, which D > 0 leaves room for. With D = 0 the result is applied
// right after the step, so there is nothing to overlap and the read stays synchronous. On the CPU
// (HostParameters) nothing changes and before_update() does nothing.
//
// Thread-safety: one trainer thread. Does not own the buffers or the weight.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "gossip/mix_channel.h"
#include "gossip/parameter_store.h"

namespace meridian::gossip {

struct DelayedMixingConfig {
  std::uint32_t delay = 0;  // D (τ in overlap mode)
  bool overlap = false;
  double mix_step = 1.0;  // α in (0, 1]: 1 is the plain rule; ≈ 1/D keeps D >= 3 stable
  std::uint64_t reaverage_every = 0;
  bool reaverage_after_view_change = true;
  std::chrono::milliseconds wait_timeout{std::chrono::minutes(2)};
};

// The mix step the daemon uses for a delay D (τ in overlap mode): the plain rule's α = 1 where it is stable
// (D <= 2) and α = 1/D beyond, where α = 1 oscillates or diverges.
constexpr double stable_mix_step(std::uint32_t delay) { return delay >= 3 ? 1.0 / delay : 1.0; }

class DelayedMixing {
 public:
  // `weight` is the push-sum weight (sgp) or nullptr. Throws error::InternalError when re-averaging
  // is asked for together with a push-sum weight (the exact mean of numerators is not a model), and
  // error::UserError for a mix_step outside (0, 1].
  DelayedMixing(DelayedMixingConfig config, MixChannel& channel, std::span<float> params, std::span<float> stats = {},
                double* weight = nullptr);
  // The same over parameters kept elsewhere (device memory: daemon/backend/backend_parameters.h); `params` must
  // outlive this object. Snapshots are read from it and corrections applied through it.
  DelayedMixing(DelayedMixingConfig config, MixChannel& channel, ParameterStore& params, std::span<float> stats = {},
                double* weight = nullptr);

  // Call after the local optimizer step k (consecutive k; a site may start or resume at any k the
  // others are at). Throws what MixChannel throws; error::InternalError when a background snapshot of the
  // previous step was not handed over with before_update().
  void after_step(std::uint64_t k);

  // Work a caller fuses into after_step()'s pass over the parameters, block by block, each block
  // [begin, end) small enough to stay in L1 between the parts: `before_mix` runs on a block before the
  // block's mixes are applied and its snapshot taken, `after_snapshot` after. The result is the same
  // bits as before_mix(0, n), after_step(k), after_snapshot(0, n), with one read of the parameters
  // instead of four (sgp's trainer: its push-sum update, the compensation, the two snapshot copies and
  // its z = x / w). The weight is the step's final one when either part runs: a part that needs the
  // weight from before the step's mixes reads it before calling. Fused only over a host span (the first
  // constructor) with a push-sum weight, no statistics and D > 0; otherwise it runs as the three calls.
  struct StepPass {
    std::function<void(std::size_t begin, std::size_t end)> before_mix;
    std::function<void(std::size_t begin, std::size_t end)> after_snapshot;
  };
  void after_step(std::uint64_t k, const StepPass& pass);

  // Call before anything writes the parameters after after_step() (the next optimizer update): hands a
  // background snapshot over (waiting for its copy only now). Does nothing without one. Throws what
  // MixChannel throws.
  void before_update();

  // Hands over a background snapshot, then applies every outstanding mix (waiting for them).
  void finish();

  std::size_t in_flight() const { return pending_.size() + (open_job_ ? 1 : 0); }
  std::uint64_t reaverages() const { return reaverages_; }
  std::uint64_t abandoned_rounds() const { return abandoned_; }
  std::uint64_t missing_shares() const { return missing_; }

 private:
  struct Snapshot {
    std::uint64_t step = 0;
    std::vector<float> x;  // x_s (params then stats); empty when D = 0
    double weight = 1.0;
  };

  // A mix to fold in and the snapshot it answers.
  struct Due {
    Snapshot snapshot;
    MixResult result;
  };

  void check_config();
  void apply(const Snapshot& s, MixResult& result);
  void apply_through(std::uint64_t last_step);
  void apply_ready();
  void note(const MixReport& report);
  void reaverage(std::uint64_t k);
  void hand_off(MixJob job);
  // after_step(k, pass) in one pass over host_ (see after_step).
  void fused_step(std::uint64_t k, const StepPass& pass);

  DelayedMixingConfig config_;
  MixChannel& channel_;
  std::unique_ptr<HostParameters> own_params_;  // the store over a host span (first constructor)
  std::span<float> host_;                       // that span; empty with the second constructor
  ParameterStore* params_;
  std::span<float> stats_;
  double* weight_;
  std::deque<Snapshot> pending_;
  std::vector<Due> due_;            // fused_step's mixes, kept between steps for its capacity
  bool background_ = false;         // snapshots are read in the background (see above)
  std::optional<MixJob> open_job_;  // the background snapshot being read: its parameters are not there yet
  bool have_view_ = false;
  std::uint64_t view_id_ = 0;
  bool reaverage_due_ = false;
  std::uint64_t reaverages_ = 0;
  std::uint64_t abandoned_ = 0;
  std::uint64_t missing_ = 0;
};

}  // namespace meridian::gossip
