// DP-SGD's step: the noisy gradient's scale and spread, the budget's last step, a resumed count, and the
// sealed budget record that checkpoints carry.
#include <catch2/catch.hpp>

#include <cmath>
#include <memory>
#include <vector>

#include "models/cpu_backend.h"
#include "models/flatten.h"
#include "models/linear.h"
#include "models/model.h"
#include "privacy/budget_record.h"
#include "privacy/dp_sgd.h"
#include "privacy/rdp_accountant.h"

using namespace meridian;

namespace {

std::unique_ptr<models::Model> linear_model(std::size_t in, std::size_t classes) {
  std::vector<std::unique_ptr<models::Layer>> layers;
  layers.push_back(std::make_unique<models::Linear>(in, classes, models::InitScheme::xavier));
  return std::make_unique<models::Model>("linear", std::move(layers), classes,
                                         std::make_shared<models::CpuBackend>(), 5);
}

}  // namespace

TEST_CASE("DP-SGD adds noise of standard deviation sigma*C over the expected batch", "[privacy][dp][unit]") {
  auto model = linear_model(100, 10);  // 1,010 parameters
  privacy::DpSgdOptions o;
  o.clip = 0.5;
  o.noise_multiplier = 2.0;
  o.delta = 1e-5;
  privacy::DpSgd dp(o, 1000, 50, 0);
  CHECK(dp.sample_rate() == Approx(0.05));
  CHECK(dp.expected_batch() == Approx(50.0));
  // An empty batch: the gradient is the noise alone, N(0, (σC)²) / (q·N) per coordinate.
  CHECK_FALSE(dp.gradient(*model, nullptr, nullptr, 0));
  double sum = 0.0, squares = 0.0;
  for (const float g : model->gradients()) {
    sum += g;
    squares += static_cast<double>(g) * g;
  }
  const double n = static_cast<double>(model->parameter_count()), expected = 2.0 * 0.5 / 50.0;
  const double mean = sum / n, stddev = std::sqrt(squares / n - mean * mean);
  // 1,010 draws: the standard deviation is within about 2.2% per standard error; 10% is 4.5 of them.
  CHECK(stddev == Approx(expected).epsilon(0.1));
  CHECK(std::abs(mean) < 4 * expected / std::sqrt(n));
  CHECK(dp.steps() == 1);
}

TEST_CASE("DP-SGD without noise is the clipped sum over the expected batch", "[privacy][dp][unit]") {
  auto model = linear_model(6, 3);
  privacy::DpSgdOptions o;
  o.clip = 0.1;
  o.noise_multiplier = 0.0;
  o.delta = 1e-5;
  privacy::DpSgd dp(o, 40, 8, 0);
  std::vector<float> x(5 * 6);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 7) - 3.0f;
  const std::vector<std::int32_t> labels{0, 1, 2, 0, 1};
  (void)model->clipped_gradient_sum(x.data(), labels.data(), 5, 0.1f);
  const std::vector<float> clipped(model->gradients().begin(), model->gradients().end());
  REQUIRE(dp.gradient(*model, x.data(), labels.data(), 5));
  for (std::size_t i = 0; i < clipped.size(); ++i) CHECK(model->gradients()[i] == Approx(clipped[i] / 8.0));
}

TEST_CASE("the DP-SGD budget allows exactly the steps whose spent epsilon stays within it", "[privacy][dp][unit]") {
  auto model = linear_model(4, 2);
  const double q = 0.1, sigma = 1.0, delta = 1e-5;
  const privacy::RdpAccountant reference(q, sigma);
  // A budget that 25 steps spend exactly: the 26th would exceed it.
  const double budget = reference.spent_after(25, delta).epsilon;
  privacy::DpSgdOptions o;
  o.clip = 1.0;
  o.noise_multiplier = sigma;
  o.delta = delta;
  o.epsilon_budget = budget;
  privacy::DpSgd dp(o, 100, 10, 0);
  std::uint64_t steps = 0;
  while (dp.next_step_within_budget()) {
    (void)dp.gradient(*model, nullptr, nullptr, 0);
    ++steps;
    REQUIRE(steps <= 1000);
  }
  CHECK(steps == 25);
  CHECK(dp.spent().epsilon <= budget);
  CHECK(reference.spent_after(steps + 1, delta).epsilon > budget);

  SECTION("a resumed site starts from the steps it spent") {
    privacy::DpSgd resumed(o, 100, 10, 25);
    CHECK(resumed.steps() == 25);
    CHECK_FALSE(resumed.next_step_within_budget());
    CHECK(resumed.spent().epsilon == Approx(dp.spent().epsilon));
  }
}

TEST_CASE("a sealed budget record opens only unaltered, for its round, model and key", "[privacy][dp][unit]") {
  const privacy::BudgetSeal seal("site secret key"), other_key("another site's secret key");
  const privacy::BudgetRecord record{0.02, 1.1, 1e-5, 1.0, 3.0, 120};
  const auto sealed = seal.seal(record, 120, "mlp|in=784");
  CHECK(seal.open(sealed, 120, "mlp|in=784") == record);
  for (std::size_t i = 0; i < sealed.size(); ++i) {
    auto altered = sealed;
    altered[i] ^= 0x01;
    INFO("byte " << i);
    CHECK_THROWS_AS(seal.open(altered, 120, "mlp|in=784"), privacy::BudgetRecordError);
  }
  CHECK_THROWS_AS(seal.open(sealed, 121, "mlp|in=784"), privacy::BudgetRecordError);
  CHECK_THROWS_AS(seal.open(sealed, 120, "mlp|in=785"), privacy::BudgetRecordError);
  CHECK_THROWS_AS(other_key.open(sealed, 120, "mlp|in=784"), privacy::BudgetRecordError);
  CHECK_THROWS_AS(seal.open(std::span(sealed).first(sealed.size() - 1), 120, "mlp|in=784"),
                  privacy::BudgetRecordError);
  const privacy::BudgetRecord no_budget{0.5, 0.9, 1e-6, 2.0, std::nullopt, 0};
  CHECK(seal.open(seal.seal(no_budget, 0, "f"), 0, "f") == no_budget);
}
