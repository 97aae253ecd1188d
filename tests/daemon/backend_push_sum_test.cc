// sgp's device-side trainer (daemon/backend_push_sum.h), run on the CPU backend next to gossip::PushSum in
// a real in-process push-sum cluster: with dyadic starts on a power-of-two number of sites every weight
// is dyadic, so 1/w is exact and the device formulation must give the CPU's numerators, weights and
// models bit for bit, and conserve Σx and Σw exactly.
#include <catch2/catch.hpp>

#include <memory>
#include <random>
#include <vector>

#include "daemon/backend_push_sum.h"
#include "gossip/push_sum.h"
#include "models/cpu_backend.h"
#include "models/model_factory.h"
#include "tests/gossip/site_cluster.h"

using meridian::daemon::BackendPushSum;
using meridian::gossip::MixChannel;
using meridian::gossip::PushSum;
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
template <typename Trainer>
Run run(std::size_t sites, std::size_t steps, const std::vector<std::vector<float>>& start) {
  SiteCluster cluster(sites, MixerKind::kPushSum);
  Run out{std::vector<std::vector<std::vector<float>>>(steps, std::vector<std::vector<float>>(sites)),
          std::vector<std::vector<std::vector<float>>>(steps, std::vector<std::vector<float>>(sites)),
          std::vector<std::vector<double>>(steps, std::vector<double>(sites))};
  cluster.run([&](std::size_t r, MixChannel& channel) {
    auto model = small_model(start[r]);
    Trainer trainer(channel, *model);
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
  HostTrainer(MixChannel& channel, meridian::models::Model& model)
      : push_sum({}, channel, model.parameters()), update(model.parameter_count()) {}
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
  BackendTrainer(MixChannel& channel, meridian::models::Model& model)
      : push_sum({}, channel, model), before(model.parameter_count()) {}
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
          "[daemon][sgp][mixing]") {
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
