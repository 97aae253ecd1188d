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
// stale θ_g or m then agrees with the others again. The error-feedback residuals stay each site's own;
// a checkpoint saves them too (read_residuals()), so that a restart does not drop what rounding held back.
// The model's normalization statistics (`stats`, may be empty) travel with that re-average and are
// replaced by their exact mean; between view changes they stay local (syncs carry pseudo-gradients).
// Outside this re-average they never leave the site: the papers' outer step knows no buffers.
//
// The push-sum outer average (OuterAverage::kPushSum, `--algo diloco-gossip`; docs/algorithms.md,
// "diloco-gossip"). No exact mean: each site takes the outer step on its own Δ first and gossips the
// result, the proposal θ_g' = θ_g − η·(Δ + μ·m) with m ← μ·m + Δ, as one push-sum share over the
// directed exponential graph (a PushSumMixer with graph period H on the communication side, so that
// consecutive outer steps take consecutive entries of the graph): it sends (w·θ_g', w) with its
// push-sum weight w (1 at the start), the mixer keeps 1/(K+1) and sends 1/(K+1) to each of the step's K
// out-peers and adds what it receives, and the site takes the de-biased θ_g ← x/w of the result, its
// new weight w, and θ ← θ_g (with overlap: θ ← θ_g + (θ − θ_s), as above). Each site keeps its own θ_g,
// m and w; they no longer agree bit for bit. The mixing is linear and conserves Σ w·θ_g' and Σ w, so
// with w = 1 everywhere (every fault-free synchronous round on the graph) the mean over the sites of
// (θ_g, m) follows diloco's rule on the mean Δ exactly, and each round contracts the sites' θ_g towards
// that mean; m differs only by a geometric sum of the sites' own Δ's and stays bounded. A dead peer
// costs its in-peers one round deadline until a view leaves it out; the mass it held is lost and the
// de-biased θ_g stay weighted averages. Only F = 1 (a late share is added to the next mix, which with
// fragments would be another fragment's), a dense trainer wire (the mixer rounds shares to fp16 itself,
// keeping what rounding cut at home), and no re-average: normalization statistics stay local.
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

// How a sync's contributions become the outer step: the exact mean of Δ (diloco) or push-sum
// gossip of the locally stepped θ_g' (diloco-gossip; see above).
enum class OuterAverage { kExactMean, kPushSum };

struct DilocoConfig {
  std::uint32_t inner_steps = 500;  // H >= 1
  double outer_lr = 0.7;            // η > 0
  double outer_momentum = 0.9;      // μ in [0, 1); Nesterov
  std::uint32_t overlap = 0;        // τ in [0, H]
  std::uint32_t fragments = 1;      // F in [1, H]
  CompressionSpec wire{};           // Encoding kDense, kFp16 or kInt8 (top-k would zero most of Δ)
  bool reaverage_after_view_change = true;
  OuterAverage outer_average = OuterAverage::kExactMean;  // kPushSum never re-averages
  std::chrono::milliseconds wait_timeout{std::chrono::minutes(2)};
};

// The wire precision's name for logs: "fp32" (dense), "fp16", "int8".
std::string diloco_wire_name(const CompressionSpec& wire);

class Diloco {
 public:
  // θ_g starts as a copy of `params`, m at zero, w at 1. Throws error::UserError for a knob outside
  // its range (above), F > params.size(), a top-k wire, or push-sum with F > 1 or a compressed wire.
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

  // Whether the wire is compressed, so that error-feedback residuals exist (fp16, int8; not fp32).
  bool holds_residuals() const { return !feedback_.empty(); }
  // The error-feedback residuals r, n floats, element i's at i whatever F is (the fragments tile the
  // buffer): what a checkpoint saves with θ_g and m. A fragment with an exchange still in flight gives
  // its residual from before that exchange was compressed, since θ_g and m do not hold the exchange yet
  // and a site resumed from them sends that progress again; a fragment never synced gives zeros.
  // Throws error::InternalError when the wire is dense or `out` does not hold n floats.
  void read_residuals(std::span<float> out) const;
  // Writes back what read_residuals() gave: a resuming site, before its first after_step(). Throws
  // error::InternalError when the wire is dense, `residuals` does not hold n floats, or an exchange is
  // in flight.
  void write_residuals(std::span<const float> residuals);

  const DilocoFragments& fragments() const { return fragments_; }
  std::size_t in_flight() const { return pending_.size(); }
  std::uint64_t outer_steps() const { return outer_steps_; }  // fragment syncs applied
  std::uint64_t reaverages() const { return reaverages_; }
  std::uint64_t abandoned_rounds() const { return abandoned_; }
  // The push-sum weight w (kPushSum; 1 with the exact mean): a checkpoint saves it with θ_g and m, and
  // a resuming site sets it back. Throws error::UserError for a weight that is not finite and positive.
  double push_sum_weight() const { return weight_; }
  OuterAverage outer_average() const { return config_.outer_average; }
  void set_push_sum_weight(double weight);

 private:
  struct Exchange {
    std::uint64_t step = 0;  // the inner step after which the sync started: its key
    std::uint32_t fragment = 0;
    std::uint32_t overlap = 0;    // τ when it started: applied after step + τ
    std::vector<float> local;     // θ_s over the fragment (empty when applied at once)
    std::vector<float> residual;  // r_f before this sync was compressed (compressed wire only; empty
                                  // before the fragment's first sync)
  };

  void start_sync(std::uint64_t k, std::uint32_t f);
  void apply_through(std::uint64_t last_step);
  void apply(const Exchange& exchange, MixResult& result);
  // Outer Nesterov step on the fragment at `begin` with pseudo-gradient d: m ← μ·m + d, θ_g ← θ_g − η·(d + μ·m).
  void outer_step(std::size_t begin, std::span<const float> d);
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
  double weight_ = 1.0;  // w (kPushSum)
  bool reaverage_due_ = false;
  bool have_view_ = false;
  std::uint64_t view_id_ = 0;
  std::uint64_t outer_steps_ = 0;
  std::uint64_t reaverages_ = 0;
  std::uint64_t abandoned_ = 0;
};

}  // namespace meridian::gossip
