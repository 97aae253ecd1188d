// sgp's mix (push-sum over the time-varying directed exponential graph of the view in force for the
// step): send (x/(K+1), w/(K+1)) to each of the step's K out-peers, keep the same share, add every
// share received. A share is added whenever it arrives: the shares of this step's in-peers are
// awaited until the round deadline; shares that arrive late, for an older step, are added to the next
// mix. A peer that a newer announced view leaves out (membership found it dead, or its old incarnation
// was superseded by a restart) is neither sent to nor waited for, even before that view is in force: its share stays
// home, so no mass is lost; a dead peer costs deadlines only until membership notices.
//
// Incoming shares are validated before they touch the model: the payload length must match and the
// weight must be finite and in (0, n]; anything else is dropped and counted in rejected().
//
// Compression (optional, fp16 only): the share of x travels as fp16 (gossip/tensor_codec.h); what
// rounding cut from each sent share stays in the kept share (kept = s + K·(s − half(s))), so the total
// mass Σx is conserved up to the rounding of that one addition, and w travels exact. z = x/w then
// mixes with a slightly different matrix than w for the rounding error only. Top-k is refused: the
// top-k entries of x itself would move mass for a few coordinates only and bias z everywhere else.
// Staleness bound τ (`staleness`, sgp's overlap): the mix of step k sends its shares, adds every share
// already here for any step ≤ k (in arrival order), and waits only for the in-peer shares of steps
// ≤ k − τ (each step's in-peers by the graph of that step's view; gossip/push_sum_staleness.h), with
// the same deadline and dead-peer rules as above. So a mix blocks on shares sent τ steps earlier, and
// a one-way latency below τ mixes' worth of time costs no waiting. τ = 0 is the plain rule: wait for
// this step's shares. Push-sum stays exact under such delays: a share in flight is mass on the link,
// added whenever it comes, so Σx and Σw are conserved once it lands, and z = x/w still reaches
// consensus (the delayed graph is the plain one with chains of relay nodes on the links).
// With robust aggregation on (gossip/robust_options.h) a share (x_j, w_j) counts as w_j·(z + clip(x_j/w_j − z)),
// z = this site's de-biased model before the mix, the difference clipped against its own update scale.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "gossip/inbox.h"
#include "gossip/mixer.h"
#include "gossip/push_sum_staleness.h"
#include "gossip/tensor_codec.h"
#include "gossip/robust_options.h"
#include "gossip/update_scale.h"
#include "peer/view.h"

namespace meridian::gossip {

// Thread-safety: none (communication thread only).
class PushSumMixer final : public Mixer {
 public:
  // `out_peers` is K, the number of out-peers per step (clamped to the graph's period). `compression`
  // must be none or fp16 (throws error::UserError for top-k). `staleness` is τ (see above).
  // `graph_period` P: the mix of step k uses the graph's entry for ⌊k/P⌋, for a caller that mixes every
  // P steps (diloco-gossip: H) so that its mixes walk the entries; 1 (sgp) is the entry for k.
  PushSumMixer(Inbox& inbox, std::size_t out_peers = 1, RoundTimeouts timeouts = {}, RobustOptions robust = {},
               CompressionSpec compression = {}, std::uint64_t staleness = 0, std::uint64_t graph_period = 1);

  // Replaces (data, weight) by kept share + received shares. Never abandons: missing shares are
  // reported in MixReport::missing. Sits the mix out (MixReport::sat_out) if this site is not in the view.
  MixReport mix(std::uint64_t step, RoundTag tag, std::span<float> data, double& weight) override;

  // From now on each step's staleness bound is `staleness_of(the view in force for the step)` (an
  // automatic τ − 1, daemon/algorithms/auto_shape.h) instead of the fixed `staleness`: every site then
  // uses the same bound for the same step. A bound that changes between steps needs nothing more: a
  // share is mass wherever it lands, so shares a larger bound no longer waits for are added when they
  // arrive, and a smaller one waits for shares of older steps it had not waited for yet.
  void set_staleness_from_view(std::function<std::uint64_t(const peer::View&)> staleness_of) {
    staleness_of_ = std::move(staleness_of);
  }

  // Adds every share still expected from the steps mixed so far, waiting for them as mix() does (the
  // round deadline from now; a sender a newer view leaves out is not awaited), and every share of those
  // steps already here; sends nothing. For the end of a run with τ ≥ 1, so that the mass in flight
  // comes home. Returns how many expected shares were given up on (also counted in missing()).
  std::size_t settle(std::span<float> data, double& weight);

  // Counters; may be read from any thread.
  std::uint64_t rejected() const { return rejected_.load(); }
  std::uint64_t missing() const { return missing_.load(); }
  // Shares cut back by robust clipping.
  std::uint64_t clipped() const { return clipped_.load(); }
  // Shares added (on time or late).
  std::uint64_t received() const { return received_.load(); }

 private:
  bool add(const peer::Message& m, std::span<float> data, double& weight, std::size_t sites);
  // add(), then gives the payload back to the transport for reuse.
  bool absorb(peer::Message&& m, std::span<float> data, double& weight, std::size_t sites);
  // Waits for the expected shares of steps ≤ `through` (see settle()); returns how many were given up on.
  std::size_t await_through(std::uint64_t through, std::span<float> data, double& weight, std::size_t sites);

  Inbox& inbox_;
  std::size_t out_peers_;
  std::uint64_t graph_period_;
  RoundTimeouts timeouts_;
  TensorCodec codec_;
  std::vector<float> packed_;   // the sent share, packed
  std::vector<float> decoded_;  // (n) what receivers decode from it; scratch for incoming shares too
  std::atomic<std::uint64_t> rejected_{0};
  std::atomic<std::uint64_t> missing_{0};
  std::atomic<std::uint64_t> clipped_{0};
  std::atomic<std::uint64_t> received_{0};
  std::uint64_t staleness_;
  std::function<std::uint64_t(const peer::View&)> staleness_of_;  // empty: staleness_ for every step
  OutstandingShares outstanding_;
  std::optional<std::uint64_t> last_step_;  // the last step mixed (not sat out)
  RobustOptions robust_;
  UpdateScale scale_;
  std::vector<float> own_model_;   // z before the mix (robust only)
  std::vector<float> difference_;  // a share's de-biased model minus own_model_ (robust only)
  std::optional<double> bound_;    // the clip bound of the mix in progress (robust only)
};

}  // namespace meridian::gossip
