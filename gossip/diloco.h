// diloco — DiLoCo (Douillard et al., arXiv 2311.08105) with Streaming DiLoCo's overlap and fragments
// (arXiv 2501.18512), the trainer side. The trainer runs its inner optimizer (any: AdamW in the papers)
// on the parameters θ every step and calls after_step(k); every H inner steps this rule takes an outer
// step (exact rules and derivation: docs/algorithms.md, "diloco"):
//
//   Δ  = θ_g − θ            the pseudo-gradient: the global parameters of the last sync minus the local
//                           ones, so Δ points against the local progress, like a gradient
//   Δ̄  = mean of Δ over the view   (RoundTag::kMix through the channel: an exact-mean mixer, the ring
//                           or the direct exchange; every site receives the same bits)
//   m  ← μ·m + Δ̄            outer SGD with Nesterov momentum (torch.optim.SGD(nesterov=True))
//   θ_g ← θ_g − η·(Δ̄ + μ·m)
//   θ  ← θ_g                or, with overlap, θ ← θ_g + (θ − θ_s): see below
//
// η = 1, μ = 0 is FedAvg (θ ← the mean of the θ's); with H = 1 as well it is allreduce of parameters.
// Δ̄ being the same bits on every site, θ_g and m evolve identically everywhere: nothing drifts.
//
// Fragments (gossip/diloco_fragments.h): with F > 1 each fragment of the buffer has its own sync, at
// staggered steps, and the rule above runs on that fragment's elements only.
//
// Overlap τ (0 <= τ <= H): the exchange of a sync after step s runs in the background while the trainer
// takes τ more inner steps; after step s + τ (waiting for it only if it is not there yet) the outer step
// is taken and the local progress made since the snapshot θ_s is kept, the delayed compensation of
// gossip/delayed_mixing.h: θ ← θ_g + (θ − θ_s). When the inner updates do not depend on θ this ends
// exactly where τ = 0 does. τ = 0 waits for the exchange at once. τ <= H applies a fragment's exchange
// before the same fragment is snapshot again. τ may change during a run (set_overlap: a shape chosen
// from the network, daemon/algorithms/auto_shape.h): each exchange keeps the τ it started with, and
// exchanges are applied in order, so one started after the change may wait for an older one with a
// larger τ (it then keeps a snapshot even with τ = 0); every site changes at the same step, so every
// site applies each exchange at the same step.
//
// Wire: Δ travels dense (float32), fp16, or int8 with a power-of-two scale per block of 256
// (gossip/tensor_codec.h; the mean is summed in float32). Compression happens here, per fragment with
// error feedback (gossip/error_feedback.h): what goes out is Δ + r_f rounded to the codec, and r_f keeps
// exactly what rounding cut, for the fragment's next sync. What goes out is a value the codec represents
// exactly, so a DirectMeanMixer built with the same spec sends it unchanged and its own error feedback
// (one stream for every fragment) never holds anything. Bounds per element, before error feedback:
// fp16 2^-11·|Δ| (2^-25 below 2^-14), int8 max|block of 256|/126.
//
// Outer momentum: m is per site, starts at zero, and is state worth saving with θ_g (global_parameters(),
// outer_momentum()). After every change of the view announced for a sync step
// (MixReport::scheduled_view_id: the same on every site), including the first view a site sees, every
// outstanding exchange is applied and (θ_g, m) are replaced by their exact mean over the view
// (RoundTag::kReaverage), and θ moves with θ_g (θ ← θ + new θ_g − old θ_g): a site that returns with a
// stale θ_g or m then agrees with the others again. The error-feedback residuals stay each site's own.
// The model's normalization statistics (`stats`, may be empty) travel with that re-average and are
// replaced by their exact mean; between view changes they stay local (syncs carry pseudo-gradients).
// Outside this re-average they never leave the site: the papers' outer step knows no buffers.
//
// Steps are absolute (a site may start or resume at any k the others are at). Errors: what MixChannel
// throws (MixError when an exchange cannot complete, the communication side's errors).
//
// Thread-safety: one trainer thread. Does not own the parameters.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <span>
#include <string>
#include <vector>

#include "gossip/diloco_fragments.h"
#include "gossip/error_feedback.h"
#include "gossip/mix_channel.h"
#include "gossip/tensor_codec.h"

namespace meridian::gossip {

struct DilocoConfig {
  std::uint32_t inner_steps = 500;  // H >= 1
  double outer_lr = 0.7;            // η > 0
  double outer_momentum = 0.9;      // μ in [0, 1); Nesterov
  std::uint32_t overlap = 0;        // τ in [0, H]
  std::uint32_t fragments = 1;      // F in [1, H]
  CompressionSpec wire{};           // Encoding kDense, kFp16 or kInt8 (top-k would zero most of Δ)
  bool reaverage_after_view_change = true;
  std::chrono::milliseconds wait_timeout{std::chrono::minutes(2)};
};

// The wire precision's name for logs: "fp32" (dense), "fp16", "int8".
std::string diloco_wire_name(const CompressionSpec& wire);

class Diloco {
 public:
  // θ_g starts as a copy of `params`, m at zero. Throws error::UserError for a knob outside its
  // range (above), F > params.size(), or a top-k wire.
  // `stats`: the normalization statistics the re-average carries (borrowed, like params).
  Diloco(DilocoConfig config, MixChannel& channel, std::span<float> params, std::span<float> stats = {});

  // Call after inner step k (consecutive k): applies the exchanges due (those of the syncs after steps
  // s <= k − τ), runs a re-average that a view change made due, and starts the sync of the fragment
  // due after k, if any (applying it at once when τ = 0). Throws what MixChannel throws.
  void after_step(std::uint64_t k);

  // Whether after_step(k) will read or write the parameters (a sync starts, an exchange is due, or a
  // re-average is): a trainer whose parameters live on a device copies them to the host and back only
  // then, every H/F steps instead of every step.
  bool touches_parameters(std::uint64_t k) const;

  // The overlap τ of the syncs started from now on (see above). Throws error::InternalError for τ > H.
  void set_overlap(std::uint32_t overlap);
  std::uint32_t overlap() const { return config_.overlap; }

  // Applies every outstanding exchange (waiting for them). The local progress since each fragment's last
  // sync stays local.
  void finish();

  // θ_g and m, n floats each: a checkpoint saves them; a resuming site writes them back before its
  // first after_step().
  std::span<float> global_parameters() { return global_; }
  std::span<float> outer_momentum() { return momentum_; }
  std::span<const float> global_parameters() const { return global_; }
  std::span<const float> outer_momentum() const { return momentum_; }

  const DilocoFragments& fragments() const { return fragments_; }
  std::size_t in_flight() const { return pending_.size(); }
  std::uint64_t outer_steps() const { return outer_steps_; }  // fragment syncs applied
  std::uint64_t reaverages() const { return reaverages_; }
  std::uint64_t abandoned_rounds() const { return abandoned_; }

 private:
  struct Exchange {
    std::uint64_t step = 0;  // the inner step after which the sync started: its key
    std::uint32_t fragment = 0;
    std::uint32_t overlap = 0;  // τ when it started: applied after step + τ
    std::vector<float> local;   // θ_s over the fragment (empty when applied at once)
  };

  void start_sync(std::uint64_t k, std::uint32_t f);
  void apply_through(std::uint64_t last_step);
  void apply(const Exchange& exchange, MixResult& result);
  void note(const MixReport& report);
  void reaverage(std::uint64_t k);

  DilocoConfig config_;
  MixChannel& channel_;
  std::span<float> params_;  // θ
  std::span<float> stats_;   // the normalization statistics
  DilocoFragments fragments_;
  std::vector<float> global_;            // (n) θ_g
  std::vector<float> momentum_;          // (n) m
  std::vector<ErrorFeedback> feedback_;  // one per fragment; empty when dense
  std::vector<float> delta_;             // (n / F) Δ of the fragment being sent, scratch
  std::vector<float> packed_;            // the codec's packed payload, scratch (the mixer packs its own)
  std::deque<Exchange> pending_;
  bool reaverage_due_ = false;
  bool have_view_ = false;
  std::uint64_t view_id_ = 0;
  std::uint64_t outer_steps_ = 0;
  std::uint64_t reaverages_ = 0;
  std::uint64_t abandoned_ = 0;
};

}  // namespace meridian::gossip
