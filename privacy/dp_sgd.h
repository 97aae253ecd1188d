// DP-SGD on a site's own examples (Abadi et al. 2016, "Deep Learning with Differential Privacy"), with
// the batches, noise and accounting that belong together:
//   - each step's examples are Poisson-sampled with rate q = batch / rows (privacy/poisson_sampler.h);
//   - each example's gradient is clipped to L2 norm C (models::Model::clipped_gradient_sum);
//   - Gaussian noise N(0, σ²C²) is added to every coordinate of the clipped sum, which is then divided
//     by the expected batch size q·rows, as Opacus does: a fixed divisor, so that the variable batch size
//     reveals nothing through the scale of the update;
//   - every step is counted by the accountant (privacy/rdp_accountant.h), whose figures assume exactly
//     this mechanism; with a budget, next_step_within_budget() says whether one more step stays within it.
// The noise and the sampling draw from a SecureRandom (privacy/secure_random.h says why).
//
// What leaves the site is then post-processing of the noisy gradient (the optimizer, the algorithms'
// mixing), which spends no more privacy.
//
// Ownership: holds its generator and sampler; the model is passed to each call. Not thread-safe: the
// trainer thread owns it.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

#include "models/model.h"
#include "privacy/poisson_sampler.h"
#include "privacy/rdp_accountant.h"
#include "privacy/secure_random.h"

namespace meridian::privacy {

struct DpSgdOptions {
  double clip = 0.0;              // C > 0: each example's gradient norm is clipped to it
  double noise_multiplier = 0.0;  // σ >= 0: the noise's standard deviation is σ·C
  double delta = 0.0;             // δ in (0, 1) of the (ε, δ) guarantee
  std::optional<double> epsilon_budget;  // ε > 0: no step may take the spent ε above it; none: no limit
};

class DpSgd {
 public:
  // `rows` local examples, `batch` the expected batch size (q = batch / rows, at most 1), `steps_taken`
  // steps already spent (a resumed site). Throws AccountantError or error::UserError on options that
  // cannot describe a run.
  DpSgd(const DpSgdOptions& options, std::size_t rows, std::size_t batch, std::uint64_t steps_taken = 0);

  const DpSgdOptions& options() const { return options_; }
  double sample_rate() const { return accountant_.sample_rate(); }
  double expected_batch() const { return expected_batch_; }

  // The rows of the next step, Poisson-sampled; possibly none. Valid until the next call.
  std::span<const std::size_t> sample() { return sampler_.next(); }

  // Whether one more step keeps the spent ε within the budget (always true without a budget).
  bool next_step_within_budget() const { return !max_steps_ || accountant_.steps() < *max_steps_; }
  // The most steps the budget allows in all; none without a budget.
  std::optional<std::uint64_t> max_steps() const { return max_steps_; }

  // Overwrites model.gradients() (host memory: the model's backend must be host-addressable) with the
  // noisy clipped gradient of a step on x (batch, model input) and labels (batch), and counts the step.
  // Returns the mean loss, or nullopt for an empty batch (whose gradient is the noise alone). Throws
  // error::UserError when the model cannot clip per example (models::Model::per_example_obstacle).
  std::optional<float> gradient(models::Model& model, const float* x, const std::int32_t* labels, std::size_t batch);

  std::uint64_t steps() const { return accountant_.steps(); }
  PrivacySpent spent() const { return accountant_.spent(options_.delta); }

 private:
  DpSgdOptions options_;
  double expected_batch_;
  SecureRandom random_;
  PoissonSampler sampler_;
  RdpAccountant accountant_;
  std::optional<std::uint64_t> max_steps_;
};

}  // namespace meridian::privacy
