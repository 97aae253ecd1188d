#include "privacy/dp_sgd.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "error/error.h"

namespace meridian::privacy {
namespace {

double sample_rate_of(std::size_t rows, std::size_t batch) {
  if (rows == 0) throw error::UserError("DP-SGD: the site has no training examples");
  if (batch == 0) throw error::UserError("DP-SGD: the batch size must be at least 1");
  return std::min(1.0, static_cast<double>(batch) / static_cast<double>(rows));
}

}  // namespace

DpSgd::DpSgd(const DpSgdOptions& options, std::size_t rows, std::size_t batch, std::uint64_t steps_taken)
    : options_(options),
      expected_batch_(sample_rate_of(rows, batch) * static_cast<double>(rows)),
      sampler_(rows, sample_rate_of(rows, batch), random_),
      accountant_(sample_rate_of(rows, batch), options.noise_multiplier) {
  if (!(options.clip > 0.0) || !std::isfinite(options.clip))
    throw error::UserError("DP-SGD: the clip " + std::to_string(options.clip) + " must be a positive number");
  accountant_.add_steps(steps_taken);
  if (options.epsilon_budget) max_steps_ = accountant_.max_steps_within(*options.epsilon_budget, options.delta);
}

std::optional<float> DpSgd::gradient(models::Model& model, const float* x, const std::int32_t* labels,
                                     std::size_t batch) {
  const auto gradients = model.gradients();
  std::optional<float> loss;
  if (batch > 0) {
    loss = model.clipped_gradient_sum(x, labels, batch, static_cast<float>(options_.clip));
  } else {
    if (const auto obstacle = model.per_example_obstacle()) throw error::UserError("DP-SGD: " + *obstacle);
    std::fill(gradients.begin(), gradients.end(), 0.0f);
  }
  const double stddev = options_.noise_multiplier * options_.clip, scale = 1.0 / expected_batch_;
  for (float& g : gradients) g = static_cast<float>((static_cast<double>(g) + stddev * random_.gaussian()) * scale);
  accountant_.add_steps(1);
  return loss;
}

}  // namespace meridian::privacy
