// Optimizer update rules against values computed by hand from the formulas of torch.optim (and
// docs/algorithms.md for heavy-ball momentum) or saved from PyTorch (AdamW: reference/adamw.txt), the
// element-wise mixing primitives, and the optimizer's state layout that gossip/ and checkpoints rely on.
#include <catch2/catch.hpp>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "error/error.h"
#include "models/cpu_backend.h"
#include "models/optimizer.h"
#include "models/worker_pool.h"
#include "reference_arrays.h"
#include "tests/support/build_paths.h"

using namespace meridian::models;

namespace {

Optimizer make(OptimizerKind kind, float lr, std::size_t n, float weight_decay = 0.0f, float momentum = 0.9f) {
  OptimizerConfig config;
  config.kind = kind;
  config.momentum = momentum;
  config.weight_decay = weight_decay;
  ScheduleConfig schedule;
  schedule.base_lr = lr;
  return Optimizer(config, schedule, n, std::make_shared<CpuBackend>());
}

}  // namespace

TEST_CASE("SGD applies w <- w - lr (g + wd w)", "[models][optimizer][unit]") {
  auto opt = make(OptimizerKind::sgd, 0.1f, 2, 0.5f);
  std::vector<float> w{1.0f, -2.0f};
  const std::vector<float> g{0.5f, 1.0f};
  opt.step(w, g);
  // w0: 1 - 0.1 (0.5 + 0.5·1) = 0.9;  w1: -2 - 0.1 (1 + 0.5·-2) = -2
  CHECK(w[0] == Approx(0.9f));
  CHECK(w[1] == Approx(-2.0f));
  CHECK(opt.state().empty());
  CHECK(opt.momentum() == 0.0f);
  CHECK(opt.step_count() == 1);
}

TEST_CASE("heavy-ball momentum follows u <- m u + g, w <- w - lr u", "[models][optimizer][unit]") {
  auto opt = make(OptimizerKind::momentum, 0.1f, 1);
  std::vector<float> w{1.0f};
  opt.step(w, std::vector<float>{1.0f});  // u = 1, w = 0.9
  CHECK(opt.momentum_buffer()[0] == Approx(1.0f));
  CHECK(w[0] == Approx(0.9f));
  opt.step(w, std::vector<float>{2.0f});  // u = 0.9 + 2 = 2.9, w = 0.9 - 0.29 = 0.61
  CHECK(opt.momentum_buffer()[0] == Approx(2.9f));
  CHECK(w[0] == Approx(0.61f));
  CHECK(opt.momentum() == Approx(0.9f));
  CHECK(opt.state().data() == opt.momentum_buffer().data());
}

TEST_CASE("the momentum buffer is live state: a correction to u changes the next step", "[models][optimizer][unit]") {
  auto opt = make(OptimizerKind::momentum, 0.1f, 1);
  std::vector<float> w{0.0f};
  opt.step(w, std::vector<float>{1.0f});  // u = 1, w = -0.1
  opt.momentum_buffer()[0] += 0.5f;       // what DTS does: u ← u + m^(D−1)·δ
  opt.step(w, std::vector<float>{0.0f});  // u = 0.9·1.5 = 1.35, w = -0.1 - 0.135
  CHECK(w[0] == Approx(-0.235f));
}

TEST_CASE("Nesterov momentum steps with g + m u", "[models][optimizer][unit]") {
  auto opt = make(OptimizerKind::nesterov, 0.1f, 1, 0.1f);
  std::vector<float> w{1.0f};
  opt.step(w, std::vector<float>{1.0f});
  // g' = 1 + 0.1·1 = 1.1; u = 1.1; w = 1 - 0.1 (1.1 + 0.9·1.1) = 1 - 0.209 = 0.791
  CHECK(opt.momentum_buffer()[0] == Approx(1.1f));
  CHECK(w[0] == Approx(0.791f));
  opt.step(w, std::vector<float>{0.0f});
  // g' = 0.0791; u = 0.99 + 0.0791 = 1.0691; w = 0.791 - 0.1 (0.0791 + 0.96219) = 0.686871
  CHECK(opt.momentum_buffer()[0] == Approx(1.0691f));
  CHECK(w[0] == Approx(0.686871f));
}

TEST_CASE("Adam matches the bias-corrected update", "[models][optimizer][unit]") {
  auto opt = make(OptimizerKind::adam, 0.01f, 2);
  std::vector<float> w{1.0f, 1.0f};
  opt.step(w, std::vector<float>{0.5f, -2.0f});
  // Step 1: m̂ = g, v̂ = g², so the step is lr·g/(|g| + eps) = ±lr.
  CHECK(w[0] == Approx(0.99f).epsilon(1e-6));
  CHECK(w[1] == Approx(1.01f).epsilon(1e-6));
  opt.step(w, std::vector<float>{0.5f, 0.0f});
  // Step 2, element 1: m = 0.9·0.1·(-2) = -0.18 → m̂ = -0.18/0.19; v = 0.999·0.001·4 = 0.003996 → v̂ = 0.003996/0.001999.
  const double m_hat = -0.18 / 0.19, v_hat = 0.003996 / (1.0 - 0.999 * 0.999);
  CHECK(w[1] == Approx(1.01 - 0.01 * m_hat / (std::sqrt(v_hat) + 1e-8)).epsilon(1e-6));
  CHECK(w[0] == Approx(0.98f).epsilon(1e-6));
  REQUIRE(opt.state().size() == 4);                          // m then v
  CHECK(opt.state()[3] == Approx(0.003996f).epsilon(1e-4));  // float rounding of 0.999f
}

TEST_CASE("AdamW matches torch.optim.AdamW step for step", "[models][optimizer][reference][unit]") {
  // reference/make_adamw_reference.py wrote reference/adamw.txt with PyTorch in float64.
  const auto ref = meridian::models::testing::read_reference_arrays(std::string(meridian::tests::source_dir()) +
                                                                    "/tests/models/reference/adamw.txt");
  const auto& hp = ref.at("hyperparameters");
  const auto& start = ref.at("start");
  const auto& grads = ref.at("gradients");
  const auto& after = ref.at("parameters_after");
  const std::size_t n = start.size(), steps = static_cast<std::size_t>(hp[5]);
  REQUIRE(grads.size() == n * steps);
  REQUIRE(after.size() == n * steps);
  OptimizerConfig config;
  config.kind = parse_optimizer_kind("adamw");
  config.beta1 = static_cast<float>(hp[1]);
  config.beta2 = static_cast<float>(hp[2]);
  config.eps = static_cast<float>(hp[3]);
  config.weight_decay = static_cast<float>(hp[4]);
  ScheduleConfig schedule;
  schedule.base_lr = static_cast<float>(hp[0]);
  Optimizer opt(config, schedule, n, std::make_shared<CpuBackend>());
  std::vector<float> w(start.begin(), start.end()), g(n);
  for (std::size_t step = 0; step < steps; ++step) {
    for (std::size_t i = 0; i < n; ++i) g[i] = static_cast<float>(grads[step * n + i]);
    opt.step(w, g);
    for (std::size_t i = 0; i < n; ++i) {
      INFO("step " << step << ", parameter " << i);
      CHECK(w[i] == Approx(after[step * n + i]).epsilon(1e-5).margin(1e-6));
    }
  }
  CHECK(opt.state().size() == 2 * n);  // m then v, as for Adam
}

TEST_CASE("AdamW decays the weights apart from the gradient, unlike Adam's L2 term", "[models][optimizer][unit]") {
  // A zero gradient: Adam's L2 term enters the moments (a full step of ±lr after bias correction, what
  // ever λ), AdamW only scales the weight by 1 − lr·λ.
  auto adamw = make(OptimizerKind::adamw, 0.1f, 1, 0.5f);
  auto adam = make(OptimizerKind::adam, 0.1f, 1, 0.5f);
  std::vector<float> wa{2.0f}, wb{2.0f};
  adamw.step(wa, std::vector<float>{0.0f});
  adam.step(wb, std::vector<float>{0.0f});
  CHECK(wa[0] == Approx(2.0f * (1.0f - 0.1f * 0.5f)).epsilon(1e-7));
  CHECK(wb[0] == Approx(1.9f).epsilon(1e-6));
  // Without decay AdamW is Adam, bit for bit.
  auto plain_w = make(OptimizerKind::adamw, 0.01f, 3), plain = make(OptimizerKind::adam, 0.01f, 3);
  std::vector<float> x{1.0f, -1.0f, 0.5f}, y = x;
  for (int step = 0; step < 3; ++step) {
    const std::vector<float> g{0.3f * step, -0.2f, 1.0f};
    plain_w.step(x, g);
    plain.step(y, g);
  }
  CHECK(x == y);
}

TEST_CASE("optimizer validates sizes and coefficients", "[models][optimizer][unit]") {
  auto opt = make(OptimizerKind::sgd, 0.1f, 3);
  std::vector<float> w(2), g(2);
  CHECK_THROWS_AS(opt.step(w, g), meridian::error::InternalError);
  CHECK_THROWS_AS(make(OptimizerKind::momentum, 0.1f, 3, 0.0f, 1.0f), meridian::error::UserError);
  CHECK_THROWS_AS(parse_optimizer_kind("rmsprop"), meridian::error::UserError);
  CHECK(parse_optimizer_kind("nesterov") == OptimizerKind::nesterov);
  CHECK(parse_optimizer_kind("adamw") == OptimizerKind::adamw);
}

TEST_CASE("the optimizer takes its learning rate from the schedule at its step", "[models][optimizer][unit]") {
  OptimizerConfig config;
  ScheduleConfig schedule;
  schedule.kind = ScheduleKind::step;
  schedule.base_lr = 1.0f;
  schedule.step_size = 1;
  schedule.gamma = 0.5f;
  Optimizer opt(config, schedule, 1, std::make_shared<CpuBackend>());
  std::vector<float> w{0.0f};
  const std::vector<float> g{1.0f};
  CHECK(opt.learning_rate() == 1.0f);
  opt.step(w, g);
  CHECK(opt.learning_rate() == 0.5f);
  opt.step(w, g);
  CHECK(w[0] == Approx(-1.5f));
  opt.set_step_count(3);
  CHECK(opt.learning_rate() == 0.125f);
}

TEST_CASE("push-sum and delayed-compensation primitives", "[models][mixing][unit]") {
  CpuBackend backend;
  std::vector<float> x{2.0f, -4.0f};
  backend.push_sum_scale(x.size(), x.data(), 0.5f);
  CHECK(x == std::vector<float>{1.0f, -2.0f});
  const std::vector<float> received{0.25f, 1.0f};
  backend.push_sum_add(x.size(), x.data(), received.data());
  CHECK(x == std::vector<float>{1.25f, -1.0f});
  // x ← x + (mixed − snapshot): local progress since the snapshot is kept on top of the mix.
  const std::vector<float> mixed{3.0f, 0.0f}, snapshot{1.0f, 1.0f};
  backend.delayed_compensation(x.size(), x.data(), mixed.data(), snapshot.data());
  CHECK(x == std::vector<float>{3.25f, -2.0f});
}

TEST_CASE("an update split across a worker pool equals the single-thread update",
          "[models][optimizer][threads][unit]") {
  const auto kind = GENERATE(OptimizerKind::sgd, OptimizerKind::momentum, OptimizerKind::nesterov, OptimizerKind::adam,
                             OptimizerKind::adamw);
  const std::size_t n = 1001;
  auto one = make(kind, 0.05f, n, 0.01f), split = make(kind, 0.05f, n, 0.01f);
  std::vector<float> w1(n), w2(n), g(n);
  for (std::size_t i = 0; i < n; ++i) {
    w1[i] = w2[i] = std::sin(static_cast<float>(i));
    g[i] = std::cos(static_cast<float>(3 * i));
  }
  WorkerPool pool(3);
  for (int step = 0; step < 3; ++step) {
    one.step(w1, g);
    split.step(w2, g, &pool);
  }
  CHECK(w1 == w2);
  CHECK(std::equal(one.state().begin(), one.state().end(), split.state().begin()));
}
