// dts — Delayed and Temporally Sparse update (docs/algorithms.md, with its derivation), the
// trainer side: it is also the SGD / heavy-ball optimizer, because the compensation must know how a
// gradient moved the weights and the momentum buffer.
//
// Every step applies the local gradient at once. Every P-th step closes a window and hands the
// window's own displacement to the communication thread for averaging: W = Σ_t γ_t·U_t and
// U = the window's momentum (U_t = m·U_{t−1} + g_t, from zero at the window start). For plain SGD
// only W travels; for momentum with P = 1 only the gradient (W = γ_s·g, U = g). Before step s + D the
// window's average comes back and the error made since s is corrected exactly:
//   w ← w − (ΔW + β·ΔU),   u ← u + m^(L−s)·ΔU,   ΔX = mean(X) − X,
// with L the last step applied and β = Σ_{t=s+1..L} γ_t·m^(t−s) (the learning rate may follow any
// schedule). For D = 0 the correction follows the step at once, which is allreduce up to rounding.
// Up to ⌈D/P⌉+1 windows are in flight, tagged by their last step and applied in order.
//
// Stability: exact for gradients that do not depend on the weights; with real ones and momentum, a
// site's reaction to its own distance from the others is undone D steps later, and that truncated
// feedback diverges from a few percent of allreduce's curvature limit at P = 1 or D = P. Keep P >= 8·D
// (docs/algorithms.md, "dts: stability with momentum"; bench/dts_stability.py).
//
// Windows follow the absolute step number: [jP, (j+1)P), closing at step (j+1)P − 1 (a site that
// starts or resumes mid-window closes a partial one there), so every site agrees on them whenever
// it started.
//
// Re-averaging: at the first window start at or after every multiple of `reaverage_every` (0: never)
// and after every change of the view announced for the step (MixReport::scheduled_view_id: the same on
// every site, also when some redid an abandoned round in a newer view), including the first view a
// site sees (a site that starts or resumes mid-run comes back in through it), the step first applies
// every outstanding correction, then replaces the weights (and the momentum buffer, as one tensor of
// two model-sized vectors) by their exact mean over the view, so floating-point drift between
// replicas cannot accumulate. When the re-average is known to be due at the window start that follows
// a window's close, with 1 <= D <= P, a compensation that applies the site's own window (exact,
// no-momentum) and an exact window mean (DtsConfig::exact_window_mean), it travels in that window's
// exchange: instead of its payload the window sends the weights (and momentum buffer) w_s, u_s after
// its last step s; that window gets no correction. The mean arrives, like any window's, before step
// s + D, and is taken in as if it had replaced (w_s, u_s) at s: w ← w + Δw − β·Δu, u ← u + m^(L−s)·Δu
// with Δx = mean(x) − x_s. That window being the only one outstanding and its corrections summing to
// zero over the view, the replicas are equal at s in exact arithmetic, so Δ holds only the
// floating-point drift; and no step waits for a re-average that travels this way (a separate one
// stalls the window start for the outstanding window's crossing and then its own). A site whose first
// step is such a window start (it starts or rejoins there) did not close the window before it and
// leaves the periodic re-average due there to the sites that did.
//
// Shape changes (reshape: a shape chosen from the network, daemon/algorithms/auto_shape.h), made by
// every site at the same step k: the open window closes early as a partial one keyed to step k − 1
// (as finish() closes one), every outstanding window is applied (waiting for it), and the new D and P
// hold from k on, with windows again following the absolute step number (the first may be partial).
// The switch waits once for the crossing in flight, as a re-average does.
//
// Normalization statistics (`stats`, the model's batch norm running statistics; may be empty) are
// local between re-averages: windows carry only displacements, which the statistics do not have. Every
// re-average carries them after the weights (and momentum) and replaces them by their exact mean; one
// that travels with a window takes their mean in as a correction like the weights', s ← s + Δs.
//
// Checkpoints: the weights and the momentum buffer are the whole state worth saving. Corrections in
// flight are lost with a crash; the restarted site rejoins, which changes the view, and the re-average
// after every view change brings it back in line.
//
// Thread-safety: one trainer thread. Does not own the parameter or momentum buffers.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <span>
#include <vector>

#include "gossip/mix_channel.h"

namespace meridian::gossip {

enum class DtsCompensation {
  kExact,        // the rule above: weights and momentum buffer
  kVanillaRule,  // w ← w − ΔW only: exact for plain SGD, drifts with momentum
  kNone,         // no averaging at all: every site trains on its own (local SGD)
  kStale,        // no compensation: the site does not apply its own gradient at once; the window's average
                 // is applied when it arrives, D steps late (delayed-gradient SGD: each gradient is taken
                 // at weights that miss the last D steps; momentum decay still runs every step)
};

// "exact" | "no-momentum" (kVanillaRule) | "off" (kStale) | "local" (kNone); nullopt otherwise.
std::optional<DtsCompensation> parse_dts_compensation(const std::string& text);

struct DtsConfig {
  std::uint32_t delay = 1;   // D >= 0
  std::uint32_t period = 1;  // P >= 1
  double momentum = 0.0;     // m in [0, 1); 0 is plain SGD
  DtsCompensation compensation = DtsCompensation::kExact;
  std::uint64_t reaverage_every = 0;
  std::chrono::milliseconds wait_timeout{std::chrono::minutes(2)};
  // The channel's kMix exchange returns the exact mean (the ring, the dense direct exchange; not a
  // compressed one): a re-average due at a window start may then travel with the window before it.
  bool exact_window_mean = false;
};

class Dts {
 public:
  // `momentum_buffer` must have params.size() elements when config.momentum != 0 (else it is unused);
  // `stats` are the normalization statistics that re-averages carry (see above), borrowed like params.
  // Throws error::UserError for P = 0 or m outside [0, 1), error::InternalError for a mis-sized momentum
  // buffer.
  Dts(DtsConfig config, MixChannel& channel, std::span<float> params, std::span<float> momentum_buffer,
      std::span<float> stats = {});

  // Step k (consecutive k; a site may start or resume at any k the others are at) with the local gradient and learning
  // rate: corrections due, a pending re-average, the local update, and the window's average started when it closes.
  // Throws what MixChannel throws (MixError on a deadline, the communication side's errors).
  void step(std::uint64_t k, std::span<const float> grad, double lr);

  // Closes a partial window and applies every outstanding correction (waiting for them). After it the
  // weights equal allreduce's when gradients do not depend on the weights. Every site must call it
  // after the same last step: the partial window's average is keyed to that step.
  void finish();
  // For a site stopped before the run's end: applies the windows in flight (waiting for them) but
  // leaves a partial window open. Sites stopped together stop at different steps, so an average
  // keyed to the stop step would have no partner and every site would wait for it.
  void stop();

  // Runs D = `delay`, P = `period` from step k on (see above); call before step(k). Throws what
  // MixChannel throws, error::UserError for P = 0.
  void reshape(std::uint64_t k, std::uint32_t delay, std::uint32_t period);
  std::uint32_t delay() const { return config_.delay; }
  std::uint32_t period() const { return config_.period; }

  std::size_t in_flight() const { return pending_.size(); }
  std::size_t max_in_flight() const { return max_in_flight_; }
  std::uint64_t reaverages() const { return reaverages_; }
  std::uint64_t abandoned_rounds() const { return abandoned_; }

 private:
  struct Window {
    std::uint64_t step = 0;    // the window's last step: its tag
    std::vector<float> local;  // what this site sent (for a carried re-average: w, then u, after step s)
    double lr = 0.0;           // γ of the last step (for the P = 1 momentum payload)
    double mpow = 1.0;         // m^(L−s)
    double beta = 0.0;         // Σ_{t=s+1..L} γ_t m^(t−s)
    bool reaverage = false;    // the exchange carried this site's (w, u) after step s instead: see above
  };

  void close_window(std::uint64_t k, std::span<const float> grad, double lr, bool fold_reaverage);
  bool periodic_reaverage_at(std::uint64_t k) const;
  // Whether the configuration lets a re-average travel with the window before it (see above);
  // can_fold_reaverage() also needs nothing outstanding at the close.
  bool folds_reaverages() const;
  bool can_fold_reaverage() const;
  void apply_through(std::uint64_t last_step);
  void correct(const Window& window, const std::vector<float>& mean);
  void take_mean_since(const Window& window, const std::vector<float>& mean);
  void reaverage(std::uint64_t k);
  void note_view(const MixReport& report);

  DtsConfig config_;
  MixChannel& channel_;
  std::span<float> params_;
  std::span<float> u_;
  std::span<float> stats_;
  std::vector<float> window_w_;  // (n) Σ γ_t U_t over the open window
  std::vector<float> window_u_;  // (n) the open window's own momentum
  std::uint32_t window_len_ = 0;
  std::deque<Window> pending_;
  std::uint64_t last_step_ = 0;
  bool reaverage_due_ = false;
  std::uint64_t folded_for_ = UINT64_MAX;  // the window start whose re-average travelled with the last window
  bool stepped_ = false;                   // step() has run on this site
  bool have_view_ = false;
  std::uint64_t view_id_ = 0;
  std::size_t max_in_flight_ = 0;
  std::uint64_t reaverages_ = 0;
  std::uint64_t abandoned_ = 0;
};

}  // namespace meridian::gossip
