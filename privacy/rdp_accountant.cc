#include "privacy/rdp_accountant.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <numbers>
#include <sstream>

namespace meridian::privacy {

namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();
constexpr double kNegInfinity = -std::numeric_limits<double>::infinity();

// The series for fractional orders stops once both of a step's terms fall below e^-30 of the unit they
// are measured against (A_α >= 1): their remainder cannot move ε in any printed digit. Opacus stops at
// the same point.
constexpr double kSeriesCutoff = -30.0;
// A guard against a series that fails to converge, which would be a bug in the terms below.
constexpr int kSeriesMaxTerms = 1'000'000;

std::vector<double> make_default_orders() {
  std::vector<double> orders;
  for (int x = 1; x < 100; ++x) orders.push_back(1.0 + x / 10.0);
  for (int a = 12; a < 64; ++a) orders.push_back(a);
  for (double extra : {1.25, 1.75, 2.25, 128.0, 256.0, 512.0}) orders.push_back(extra);
  std::sort(orders.begin(), orders.end());
  return orders;
}

// log(e^a + e^b) without overflow.
double log_add(double a, double b) {
  if (a == kNegInfinity) return b;
  if (b == kNegInfinity) return a;
  const double high = std::max(a, b);
  return high + std::log1p(std::exp(-std::abs(a - b)));
}

// log(e^a - e^b) for a >= b.
double log_sub(double a, double b) {
  error::enforce(a >= b, "log-space subtraction would go negative in the sampled Gaussian series");
  if (b == kNegInfinity) return a;
  if (a == b) return kNegInfinity;
  return a + std::log(-std::expm1(b - a));
}

// log(erfc(x)) for any x. erfc underflows past x ≈ 26.5 and loses relative precision only near that
// point, so beyond x = 20 the asymptotic (Laurent) expansion of log(erfc(x)) at infinity takes over:
//   log erfc(x) = -x² - log x - ½ log π - 1/(2x²) + 5/(8x⁴) - 37/(24x⁶) + 353/(64x⁸) + O(x⁻¹⁰),
// whose truncation error at x = 20 is below 1e-12.
double log_erfc(double x) {
  if (x < 20.0) return std::log(std::erfc(x));
  const double inv2 = 1.0 / (x * x);
  return -x * x - std::log(x) - 0.5 * std::log(std::numbers::pi) +
         inv2 * (-0.5 + inv2 * (0.625 + inv2 * (-37.0 / 24.0 + inv2 * (353.0 / 64.0))));
}

// log A_α for integer α >= 2 (MTZ 2019, section 3.3, "integer α"):
//   A_α = Σ_{i=0..α} C(α, i) (1-q)^(α-i) q^i exp((i² - i) / (2σ²)).
double log_a_integer(double q, double sigma, int alpha) {
  double log_a = kNegInfinity;
  const double log_q = std::log(q);
  const double log_1mq = std::log1p(-q);
  const double lgamma_alpha = std::lgamma(alpha + 1.0);
  for (int i = 0; i <= alpha; ++i) {
    const double log_binomial = lgamma_alpha - std::lgamma(i + 1.0) - std::lgamma(alpha - i + 1.0);
    const double term =
        log_binomial + i * log_q + (alpha - i) * log_1mq + (static_cast<double>(i) * i - i) / (2.0 * sigma * sigma);
    log_a = log_add(log_a, term);
  }
  return log_a;
}

// log A_α for fractional α > 1 (MTZ 2019, section 3.3, "fractional α"): A_α = A₀ + A₁ with
//   A₀ = Σ_i C(α, i) (1-q)^(α-i) q^i exp((i² - i)/(2σ²)) · ½ erfc((i - z₀)/(√2 σ)),
//   A₁ = Σ_i C(α, i) q^(α-i) (1-q)^i exp(((α-i)² - (α-i))/(2σ²)) · ½ erfc((z₀ - (α-i))/(√2 σ)),
// z₀ = σ² log(1/q - 1) + ½. C(α, i) alternates in sign once i > α, so each sum is kept as one log of a
// positive value and the negative terms are subtracted in log space.
double log_a_fractional(double q, double sigma, double alpha) {
  const double log_q = std::log(q);
  const double log_1mq = std::log1p(-q);
  const double z0 = sigma * sigma * std::log(1.0 / q - 1.0) + 0.5;
  const double two_var = 2.0 * sigma * sigma;
  const double erfc_scale = 1.0 / (std::numbers::sqrt2 * sigma);
  double log_a0 = kNegInfinity;
  double log_a1 = kNegInfinity;
  double log_abs_binomial = 0.0;  // log |C(α, i)|, updated by C(α, i+1) = C(α, i) (α - i)/(i + 1)
  bool binomial_positive = true;
  for (int i = 0;; ++i) {
    error::enforce(i < kSeriesMaxTerms, "the sampled Gaussian series for a fractional order did not converge");
    const double j = alpha - i;
    const double log_t0 = log_abs_binomial + i * log_q + j * log_1mq;
    const double log_t1 = log_abs_binomial + j * log_q + i * log_1mq;
    const double log_e0 = std::log(0.5) + log_erfc((i - z0) * erfc_scale);
    const double log_e1 = std::log(0.5) + log_erfc((z0 - j) * erfc_scale);
    const double log_s0 = log_t0 + (static_cast<double>(i) * i - i) / two_var + log_e0;
    const double log_s1 = log_t1 + (j * j - j) / two_var + log_e1;
    if (binomial_positive) {
      log_a0 = log_add(log_a0, log_s0);
      log_a1 = log_add(log_a1, log_s1);
    } else {
      log_a0 = log_sub(log_a0, log_s0);
      log_a1 = log_sub(log_a1, log_s1);
    }
    if (std::max(log_s0, log_s1) < kSeriesCutoff) break;
    log_abs_binomial += std::log(std::abs(alpha - i)) - std::log(i + 1.0);
    if (alpha - i < 0) binomial_positive = !binomial_positive;
  }
  return log_add(log_a0, log_a1);
}

void check_delta(double delta) {
  if (!(delta > 0.0 && delta < 1.0)) {
    std::ostringstream message;
    message << "privacy delta must lie strictly between 0 and 1, got " << delta;
    throw AccountantError(message.str());
  }
}

// ε after `steps` steps of the mechanism whose one-step RDP at default_orders() is `rdp_per_step`.
PrivacySpent spent_from_rdp_per_step(std::span<const double> rdp_per_step, std::uint64_t steps, double delta) {
  check_delta(delta);
  if (steps == 0) return {0.0, 0.0};
  std::vector<double> rdp(rdp_per_step.begin(), rdp_per_step.end());
  for (double& r : rdp) r *= static_cast<double>(steps);
  return epsilon_from_rdp(default_orders(), rdp, delta);
}

std::vector<double> rdp_at_default_orders(double q, double sigma) {
  std::vector<double> rdp;
  for (double order : default_orders()) rdp.push_back(subsampled_gaussian_rdp(q, sigma, order));
  return rdp;
}

}  // namespace

std::span<const double> default_orders() {
  static const std::vector<double> orders = make_default_orders();
  return orders;
}

double subsampled_gaussian_rdp(double sample_rate, double noise_multiplier, double order) {
  if (!(sample_rate >= 0.0 && sample_rate <= 1.0)) {
    std::ostringstream message;
    message << "sample rate must lie in [0, 1], got " << sample_rate;
    throw AccountantError(message.str());
  }
  if (!(noise_multiplier >= 0.0) || std::isinf(noise_multiplier)) {
    std::ostringstream message;
    message << "noise multiplier must be finite and >= 0, got " << noise_multiplier;
    throw AccountantError(message.str());
  }
  if (!(order > 1.0) || std::isinf(order)) {
    std::ostringstream message;
    message << "Renyi order must be finite and > 1, got " << order;
    throw AccountantError(message.str());
  }
  if (sample_rate == 0.0) return 0.0;
  if (noise_multiplier == 0.0) return kInfinity;
  if (sample_rate == 1.0) return order / (2.0 * noise_multiplier * noise_multiplier);
  const double log_a = order == std::floor(order) && order <= std::numeric_limits<int>::max()
                           ? log_a_integer(sample_rate, noise_multiplier, static_cast<int>(order))
                           : log_a_fractional(sample_rate, noise_multiplier, order);
  // A_α >= 1 exactly; rounding in the last place must not report a negative divergence.
  return std::max(0.0, log_a / (order - 1.0));
}

PrivacySpent epsilon_from_rdp(std::span<const double> orders, std::span<const double> rdp, double delta,
                              Conversion conversion) {
  check_delta(delta);
  if (orders.size() != rdp.size())
    throw AccountantError("RDP values and Renyi orders differ in number: " + std::to_string(rdp.size()) +
                          " values for " + std::to_string(orders.size()) + " orders");
  PrivacySpent best{kInfinity, std::numeric_limits<double>::quiet_NaN()};
  const double log_delta = std::log(delta);
  for (std::size_t i = 0; i < orders.size(); ++i) {
    const double alpha = orders[i];
    if (!(alpha > 1.0) || std::isinf(alpha)) {
      std::ostringstream message;
      message << "Renyi order must be finite and > 1, got " << alpha;
      throw AccountantError(message.str());
    }
    if (std::isnan(rdp[i]) || std::isinf(rdp[i])) continue;
    const double epsilon = conversion == Conversion::kBalle2020 ? rdp[i] + std::log((alpha - 1.0) / alpha) -
                                                                      (log_delta + std::log(alpha)) / (alpha - 1.0)
                                                                : rdp[i] - log_delta / (alpha - 1.0);
    if (epsilon < best.epsilon) best = {epsilon, alpha};
  }
  // Both conversions can dip below 0 for a tiny divergence and δ near 1; ε < 0 means nothing.
  best.epsilon = std::max(0.0, best.epsilon);
  return best;
}

std::optional<std::string> sampled_gaussian_problem(double sample_rate, double noise_multiplier) {
  std::ostringstream message;
  if (!(sample_rate > 0.0 && sample_rate <= 1.0)) {
    message << "sample rate must lie in (0, 1] (the expected batch size over the number of records), got "
            << sample_rate;
    return message.str();
  }
  if (!(noise_multiplier >= 0.0) || std::isinf(noise_multiplier)) {
    message << "noise multiplier must be finite and >= 0, got " << noise_multiplier;
    return message.str();
  }
  return std::nullopt;
}

RdpAccountant::RdpAccountant(double sample_rate, double noise_multiplier)
    : sample_rate_(sample_rate), noise_multiplier_(noise_multiplier) {
  if (auto problem = sampled_gaussian_problem(sample_rate, noise_multiplier)) throw AccountantError(*problem);
  rdp_per_step_ = rdp_at_default_orders(sample_rate, noise_multiplier);
}

void RdpAccountant::add_steps(std::uint64_t steps) {
  error::enforce(steps <= std::numeric_limits<std::uint64_t>::max() - steps_, "privacy step count overflows");
  steps_ += steps;
}

PrivacySpent RdpAccountant::spent(double delta) const { return spent_after(steps_, delta); }

PrivacySpent RdpAccountant::spent_after(std::uint64_t steps, double delta) const {
  return spent_from_rdp_per_step(rdp_per_step_, steps, delta);
}

std::uint64_t RdpAccountant::max_steps_within(double epsilon_budget, double delta) const {
  check_delta(delta);
  if (!(epsilon_budget >= 0.0) || std::isinf(epsilon_budget)) {
    std::ostringstream message;
    message << "privacy budget epsilon must be finite and >= 0, got " << epsilon_budget;
    throw AccountantError(message.str());
  }
  const auto within = [&](std::uint64_t steps) { return spent_after(steps, delta).epsilon <= epsilon_budget; };
  if (!within(1)) return 0;
  // ε is non-decreasing in the step count (each order's bound is), so doubling brackets the last count
  // within the budget and bisection finds it: within(low) and !within(high) throughout.
  std::uint64_t low = 1;
  std::uint64_t high = 2;
  constexpr std::uint64_t kMaxSteps = std::numeric_limits<std::uint64_t>::max();
  while (within(high)) {
    low = high;
    if (high == kMaxSteps) return kMaxSteps;
    high = high > kMaxSteps / 2 ? kMaxSteps : 2 * high;
  }
  while (high - low > 1) {
    const std::uint64_t middle = low + (high - low) / 2;
    (within(middle) ? low : high) = middle;
  }
  return low;
}

double noise_multiplier_for(double target_epsilon, double delta, double sample_rate, std::uint64_t steps) {
  check_delta(delta);
  if (!(target_epsilon > 0.0) || std::isinf(target_epsilon)) {
    std::ostringstream message;
    message << "target epsilon must be finite and > 0, got " << target_epsilon;
    throw AccountantError(message.str());
  }
  if (auto problem = sampled_gaussian_problem(sample_rate, 0.0)) throw AccountantError(*problem);
  if (steps == 0) throw AccountantError("a noise multiplier is calibrated for at least one step, got 0 steps");
  const auto meets = [&](double sigma) {
    return spent_from_rdp_per_step(rdp_at_default_orders(sample_rate, sigma), steps, delta).epsilon <= target_epsilon;
  };
  constexpr double kLargestSigma = 1e6;
  constexpr double kSmallestSigma = 1e-6;
  constexpr double kRelativeTolerance = 1e-3;
  // ε falls as σ grows (more noise is post-processing of less), so bracket [low, high] with !meets(low)
  // and meets(high), then bisect.
  double high = 1.0;
  while (!meets(high)) {
    high *= 2.0;
    if (high > kLargestSigma) {
      std::ostringstream message;
      message << "no noise multiplier up to " << kLargestSigma << " keeps epsilon <= " << target_epsilon << " at delta "
              << delta << " after " << steps << " steps at sample rate " << sample_rate;
      throw AccountantError(message.str());
    }
  }
  double low = high / 2.0;
  while (meets(low)) {
    high = low;
    low /= 2.0;
    if (low < kSmallestSigma) return high;
  }
  while (high - low > kRelativeTolerance * high) {
    const double middle = 0.5 * (low + high);
    (meets(middle) ? high : low) = middle;
  }
  return high;
}

}  // namespace meridian::privacy
