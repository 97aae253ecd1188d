// sgp's device-side trainer (daemon/backend/backend_push_sum.h), run on the CPU backend next to gossip::PushSum in
// a real in-process push-sum cluster: with dyadic starts on a power-of-two number of sites every weight
// is dyadic, so 1/w is exact and the device formulation must give the CPU's numerators, weights and
// models bit for bit, and conserve Σx and Σw exactly.
#include <catch2/catch.hpp>

#include <memory>
#include <random>
#include <vector>

#include "daemon/backend/backend_push_sum.h"
#include "gossip/push_sum.h"
#include "models/cpu_backend.h"
#include "models/model_factory.h"
#include "tests/gossip/site_cluster.h"

using meridian::daemon::BackendPushSum;
using meridian::gossip::MixChannel;
using meridian::gossip::PushSum;
using meridian::gossip::PushSumStepScale;
using meridian::gossip::testing::MixerKind;
using meridian::gossip::testing::SiteCluster;

namespace {

struct Run {
  std::vector<std::vector<std::vector<float>>> x, z;  // [step][site]
  std::vector<std::vector<double>> w;                 // [step][site]
};

// A logistic regression over 3 features and 2 classes: 8 parameters.
std::unique_ptr<meridian::models::Model> small_model(const std::vector<float>& start) {
  auto model = meridian::models::make_logreg({3, 1, 1}, 2, std::make_shared<meridian::models::CpuBackend>(1), 1);
  model->write_parameters(start);
  return model;
}

// `steps` push-sum steps per site; each step's optimizer displacement is a fixed dyadic vector.
// Every site starts from weight `start_weight` (as after a fault that lost mass; a power of two keeps
// every weight dyadic).
template <typename Trainer>
// `scale` is the trainers' step factor (gossip/push_sum_step_scale.h).
Run run(std::size_t sites, std::size_t steps, const std::vector<std::vector<float>>& start, double start_weight = 1.0,
        PushSumStepScale scale = {}) {
  SiteCluster cluster(sites, MixerKind::kPushSum);
  Run out{std::vector<std::vector<std::vector<float>>>(steps, std::vector<std::vector<float>>(sites)),
          std::vector<std::vector<std::vector<float>>>(steps, std::vector<std::vector<float>>(sites)),
          std::vector<std::vector<double>>(steps, std::vector<double>(sites))};
  cluster.run([&](std::size_t r, MixChannel& channel) {
    auto model = small_model(start[r]);
    Trainer trainer(channel, *model, scale);
    if (start_weight != 1.0) {
      std::vector<float> x(start[r]);
      for (float& v : x) v = static_cast<float>(v * start_weight);
      trainer.push_sum.restore(x, start_weight);
    }
    for (std::size_t k = 0; k < steps; ++k) {
      trainer.step(k, *model, static_cast<float>((k + r) % 4) / 8.0f);
      out.x[k][r] = trainer.numerator();
      out.w[k][r] = trainer.weight();
      out.z[k][r].assign(model->parameters().begin(), model->parameters().end());
    }
  });
  return out;
}

// gossip::PushSum with the displacement given on the host.
struct HostTrainer {
  HostTrainer(MixChannel& channel, meridian::models::Model& model, PushSumStepScale scale)
      : push_sum({}, channel, model.parameters(), scale), update(model.parameter_count()) {}
  void step(std::size_t k, meridian::models::Model&, float displacement) {
    std::fill(update.begin(), update.end(), displacement);
    push_sum.step(k, update);
  }
  std::vector<float> numerator() const { return {push_sum.numerator().begin(), push_sum.numerator().end()}; }
  double weight() const { return push_sum.weight(); }
  PushSum push_sum;
  std::vector<float> update;
};

// BackendPushSum, given the model before the step and the model after it, as the daemon's trainer does.
struct BackendTrainer {
  BackendTrainer(MixChannel& channel, meridian::models::Model& model, PushSumStepScale scale)
      : push_sum({}, channel, model, scale), before(model.parameter_count()) {}
  void step(std::size_t k, meridian::models::Model& model, float displacement) {
    auto z = model.parameters();
    std::copy(z.begin(), z.end(), before.begin());
    for (float& v : z) v -= displacement;  // the "optimizer step"
    push_sum.step(k, before.data());
  }
  std::vector<float> numerator() {
    const auto x = push_sum.numerator();
    return {x.begin(), x.end()};
  }
  double weight() const { return push_sum.weight(); }
  BackendPushSum push_sum;
  std::vector<float> before;
};

}  // namespace

TEST_CASE("sgp's device-side trainer matches gossip::PushSum bit for bit on the CPU backend",
          "[daemon][sgp][mixing][cluster]") {
  const std::size_t sites = 4, steps = 12;
  std::mt19937 rng(5);
  std::vector<std::vector<float>> start(sites, std::vector<float>(8));
  for (auto& s : start)
    for (float& v : s) v = static_cast<float>(rng() % 128) / 16.0f;
  const Run host = run<HostTrainer>(sites, steps, start);
  const Run device = run<BackendTrainer>(sites, steps, start);
  for (std::size_t k = 0; k < steps; ++k) {
    INFO("step " << k);
    CHECK(device.w[k] == host.w[k]);
    CHECK(device.x[k] == host.x[k]);
    CHECK(device.z[k] == host.z[k]);
    double mass = 0.0;
    for (double w : device.w[k]) mass += w;
    CHECK(mass == static_cast<double>(sites));
  }
}

TEST_CASE("sgp with a weight below 1 moves the de-biased model by the update itself, on host and device alike",
          "[daemon][sgp][mixing][cluster]") {
  // All four sites at w = 1/2 (mass lost to a fault): the gradient step is scaled by w, so z = x / w
  // moves by the displacement, not by twice it.
  const std::size_t sites = 4, steps = 6;
  std::vector<std::vector<float>> start(sites, std::vector<float>(8, 1.0f));
  const Run host = run<HostTrainer>(sites, steps, start, 0.5);
  const Run device = run<BackendTrainer>(sites, steps, start, 0.5);
  for (std::size_t k = 0; k < steps; ++k) {
    INFO("step " << k);
    CHECK(device.w[k] == host.w[k]);
    CHECK(device.x[k] == host.x[k]);
    CHECK(device.z[k] == host.z[k]);
  }
  // Mixing conserves Σx and Σw (= 2), so the mean of z over the sites after step k is the start minus
  // the mean displacement, (0 + 1 + 2 + 3) / 32 = 3/16 per step. Unscaled, it would move by 3/8.
  for (std::size_t k = 0; k < steps; ++k) {
    double mean = 0.0;
    for (std::size_t r = 0; r < sites; ++r) {
      CHECK(host.w[k][r] == 0.5);
      mean += static_cast<double>(host.z[k][r][0]) / static_cast<double>(sites);
    }
    CHECK(mean == Approx(1.0 - 0.1875 * static_cast<double>(k + 1)).margin(1e-6));
  }
}

TEST_CASE("sgp's device-side trainer applies the overlap gain as gossip::PushSum does",
          "[daemon][sgp][mixing][cluster]") {
  // Weights of 1/2 (mass missing) and the gain of τ = 3, K = 1 (up to 2): the factor w·g is no longer
  // dyadic, so the numerators are not either and z = x · (1/w) on the device differs from the host's
  // x / w by up to an ulp (backend_push_sum.h), which the next displacement carries on. The weights
  // agree exactly, numerators and models to float rounding, and the gain is at work (z moves by more
  // than the displacement once ŵ has fallen).
  const std::size_t sites = 4, steps = 40;
  std::vector<std::vector<float>> start(sites, std::vector<float>(8, 1.0f));
  const Run host = run<HostTrainer>(sites, steps, start, 0.5, PushSumStepScale(2, 1));
  const Run device = run<BackendTrainer>(sites, steps, start, 0.5, PushSumStepScale(2, 1));
  const Run plain = run<HostTrainer>(sites, steps, start, 0.5);
  for (std::size_t k = 0; k < steps; ++k) {
    INFO("step " << k);
    CHECK(device.w[k] == host.w[k]);
    for (std::size_t r = 0; r < sites; ++r) {
      for (std::size_t i = 0; i < start[r].size(); ++i) {
        CHECK(device.x[k][r][i] == Approx(host.x[k][r][i]).epsilon(1e-5));
        CHECK(device.z[k][r][i] == Approx(host.z[k][r][i]).epsilon(1e-5));
      }
    }
  }
  // Without the gain the mean of z falls by 3/16 per step (the test above); with it, by more.
  double gained = 0.0, unscaled = 0.0;
  for (std::size_t r = 0; r < sites; ++r) {
    gained += static_cast<double>(host.z[steps - 1][r][0]) / static_cast<double>(sites);
    unscaled += static_cast<double>(plain.z[steps - 1][r][0]) / static_cast<double>(sites);
  }
  CHECK(unscaled == Approx(1.0 - 0.1875 * static_cast<double>(steps)).margin(1e-5));
  CHECK(gained < unscaled - 0.1875);
}
