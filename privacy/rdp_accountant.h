// Privacy accounting for DP-SGD: the Rényi differential privacy (RDP) of the Poisson-subsampled Gaussian
// mechanism, composed over steps and converted to an (ε, δ) guarantee.
//
// The mechanism: each step includes every record independently with probability q (the sample rate),
// clips each record's contribution to L2 norm C, sums, and adds N(0, σ²C²) noise per coordinate; σ is the
// noise multiplier. Its RDP at order α is computed as in Mironov, Talwar and Zhang, "Rényi Differential
// Privacy of the Sampled Gaussian Mechanism" (arXiv 1908.10530, 2019), section 3.3: for integer α by the
// binomial expansion of A_α, for fractional α by its two-sided series with erfc tails, every sum taken in
// log space. This is the computation Opacus (opacus/accountants/analysis/rdp.py) and TF-Privacy use, so
// their figures are reproduced to rounding. RDP composes additively over steps.
//
// Conversion to (ε, δ): the improved conversion of Balle, Barthe, Gaboardi, Hsu and Sato, "Hypothesis
// Testing Interpretations and Renyi Differential Privacy" (AISTATS 2020, arXiv 1905.09982, Theorem 21),
// also stated by Canonne, Kamath and Steinke (arXiv 2004.00010 v4, Proposition 12):
//     ε = min over α of  RDP(α) + log((α-1)/α) - (log δ + log α) / (α - 1),
// which is what Opacus's get_privacy_spent computes. It is never larger than Mironov's original
// ε = RDP(α) + log(1/δ)/(α-1) (Proposition 3 of "Rényi Differential Privacy", 2017), which is kept as
// `Conversion::kMironov` only to compare with figures published under it.
//
// Thread safety: const member functions may be called from any number of threads; add_steps must not run
// concurrently with anything else on the same accountant.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "error/error.h"

namespace meridian::privacy {

// A sample rate, noise multiplier, δ, budget or step count that cannot describe a DP-SGD run: a user
// error (the operator's settings are wrong).
class AccountantError : public error::UserError {
 public:
  explicit AccountantError(const std::string& what) : error::UserError(what) {}
};

// An (ε, δ) guarantee for the δ it was asked with. `order` is the Rényi order α at which the bound was
// tightest; 0 when nothing was spent (ε = 0) and NaN when no order gives a finite bound (ε = +inf, as
// for a noise multiplier of 0).
struct PrivacySpent {
  double epsilon;
  double order;
};

enum class Conversion {
  kBalle2020,  // ε = RDP + log((α-1)/α) - (log δ + log α)/(α-1); the default, as in Opacus
  kMironov,    // ε = RDP + log(1/δ)/(α-1); looser, for figures published with it
};

// The Rényi orders the accountant minimizes over: 1.1 to 10.9 by 0.1 and 12 to 63 (Opacus's
// DEFAULT_ALPHAS), with 1.25, 1.75, 2.25, 128, 256 and 512 (TF-Privacy's list) added. Ascending.
std::span<const double> default_orders();

// RDP at order `order` (> 1) of one step of the Poisson-subsampled Gaussian mechanism with sample rate
// `sample_rate` in [0, 1] and noise multiplier `noise_multiplier` >= 0. 0 when the sample rate is 0,
// +inf when the noise multiplier is 0; order/(2σ²) when the sample rate is 1 (the Gaussian mechanism).
// Throws AccountantError on values outside those ranges.
double subsampled_gaussian_rdp(double sample_rate, double noise_multiplier, double order);

// The (ε, δ) bound implied by RDP values `rdp[i]` at orders `orders[i]` (each > 1), minimized over the
// orders; ε is clamped at 0 from below. Throws AccountantError when δ is not in (0, 1) or the spans'
// sizes differ.
PrivacySpent epsilon_from_rdp(std::span<const double> orders, std::span<const double> rdp, double delta,
                              Conversion conversion = Conversion::kBalle2020);

// Why `sample_rate` and `noise_multiplier` cannot describe a run, or nothing when they can: the sample rate
// must lie in (0, 1] and the noise multiplier be finite and >= 0. For configuration checks that collect
// every problem before reporting.
std::optional<std::string> sampled_gaussian_problem(double sample_rate, double noise_multiplier);

// Accumulates steps of the Poisson-subsampled Gaussian mechanism with fixed q and σ. The state is the
// three numbers (q, σ, steps), so a resumed run rebuilds it from them.
class RdpAccountant {
 public:
  // Throws AccountantError naming the value when sampled_gaussian_problem reports one. σ = 0 (no noise) is
  // accepted and spends an infinite ε on the first step; q = 1 is the full-batch Gaussian mechanism.
  RdpAccountant(double sample_rate, double noise_multiplier);

  double sample_rate() const { return sample_rate_; }
  double noise_multiplier() const { return noise_multiplier_; }

  // Records `steps` more steps. Throws error::InternalError if the count would overflow.
  void add_steps(std::uint64_t steps);
  std::uint64_t steps() const { return steps_; }

  // The (ε, δ) guarantee after steps() steps; ε = 0 after none. Throws AccountantError when δ is not in
  // (0, 1).
  PrivacySpent spent(double delta) const;
  // The same after a hypothetical `steps` steps, whatever steps() is.
  PrivacySpent spent_after(std::uint64_t steps, double delta) const;

  // The largest step count T with spent_after(T, δ).epsilon <= epsilon_budget, so that a run stops before
  // the step that would exceed the budget: spent_after(T) <= budget < spent_after(T + 1). 0 when even one
  // step exceeds it (always so for σ = 0); UINT64_MAX when no count of steps exceeds it. Throws
  // AccountantError when the budget is negative or not finite, or δ is not in (0, 1).
  std::uint64_t max_steps_within(double epsilon_budget, double delta) const;

 private:
  double sample_rate_;
  double noise_multiplier_;
  std::uint64_t steps_ = 0;
  std::vector<double> rdp_per_step_;  // at default_orders()
};

// The smallest noise multiplier, to 1e-3 relative, for which `steps` steps at `sample_rate` spend at most
// `target_epsilon` at `delta` (the returned σ always meets the target; σ(1 - 1e-3) may not). Throws
// AccountantError when the target is not finite and positive, δ is not in (0, 1), the sample rate is not in
// (0, 1], steps is 0, or no σ up to 1e6 meets the target.
double noise_multiplier_for(double target_epsilon, double delta, double sample_rate, std::uint64_t steps);

}  // namespace meridian::privacy
