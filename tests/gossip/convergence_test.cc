// Every mixer trains the same model to the same optimum: L2-regularised logistic regression on a
// synthetic linearly separable problem, 8 sites (in-memory transport, a trainer and a communication
// thread per site), each site holding 1/8 of the data and computing full-batch gradients of its shard.
//
// Regularisation: λ/2·|w|² with λ = 0.01 (bias included). Without it the separable problem has no
// minimiser (the loss goes to 0 as |w| → ∞); with it the loss is 0.01-strongly convex, so the optimum
// is unique and single-site full-batch gradient descent (in double) finds it to machine precision.
#include <catch2/catch.hpp>

#include <array>
#include <cmath>
#include <random>

#include "gossip/delayed_mixing.h"
#include "gossip/dts.h"
#include "gossip/push_sum.h"
#include "gossip/synchronous_average.h"
#include "site_cluster.h"

using namespace meridian::gossip;
using meridian::gossip::testing::MixerKind;
using meridian::gossip::testing::SiteCluster;
using namespace std::chrono_literals;

namespace {

constexpr std::size_t kSites = 8, kPerSite = 32, kFeatures = 4, kDim = kFeatures + 1;  // + bias
constexpr double kLambda = 0.01;

struct Problem {
  std::vector<std::array<double, kFeatures>> x;
  std::vector<double> y;  // ±1
};

Problem make_problem() {
  std::mt19937 rng(2026);
  std::normal_distribution<double> normal;
  const std::array<double, kFeatures> truth = {1.5, -2.0, 0.5, 1.0};
  Problem p;
  while (p.x.size() < kSites * kPerSite) {
    std::array<double, kFeatures> v;
    for (auto& f : v) f = normal(rng);
    double margin = 0.3;
    for (std::size_t i = 0; i < kFeatures; ++i) margin += truth[i] * v[i];
    if (std::abs(margin) < 0.2) continue;  // a gap between the classes: separable
    p.x.push_back(v);
    p.y.push_back(margin > 0 ? 1.0 : -1.0);
  }
  return p;
}

// Mean loss and gradient over samples [begin, end) at w (double precision).
double loss_and_gradient(const Problem& p, std::size_t begin, std::size_t end, const std::vector<double>& w,
                         std::vector<double>* grad) {
  double loss = 0;
  if (grad) grad->assign(kDim, 0.0);
  for (std::size_t s = begin; s < end; ++s) {
    double z = w[kFeatures];
    for (std::size_t i = 0; i < kFeatures; ++i) z += w[i] * p.x[s][i];
    double margin = p.y[s] * z;
    loss += margin > 0 ? std::log1p(std::exp(-margin)) : -margin + std::log1p(std::exp(margin));
    if (grad) {
      double coef = -p.y[s] / (1.0 + std::exp(margin));
      for (std::size_t i = 0; i < kFeatures; ++i) (*grad)[i] += coef * p.x[s][i];
      (*grad)[kFeatures] += coef;
    }
  }
  const double count = static_cast<double>(end - begin);
  double reg = 0;
  for (std::size_t i = 0; i < kDim; ++i) {
    reg += w[i] * w[i];
    if (grad) (*grad)[i] = (*grad)[i] / count + kLambda * w[i];
  }
  return loss / count + 0.5 * kLambda * reg;
}

double global_loss(const Problem& p, const std::vector<float>& w) {
  return loss_and_gradient(p, 0, p.x.size(), std::vector<double>(w.begin(), w.end()), nullptr);
}

double optimal_loss(const Problem& p) {
  std::vector<double> w(kDim, 0.0), g;
  for (int it = 0; it < 20000; ++it) {
    loss_and_gradient(p, 0, p.x.size(), w, &g);
    for (std::size_t i = 0; i < kDim; ++i) w[i] -= 1.0 * g[i];
  }
  return loss_and_gradient(p, 0, p.x.size(), w, nullptr);
}

// The shard gradient of site r at the model `w` (float in, float out: what a trainer would compute).
void site_gradient(const Problem& p, std::size_t r, std::span<const float> w, std::vector<float>& out) {
  std::vector<double> g;
  loss_and_gradient(p, r * kPerSite, (r + 1) * kPerSite, std::vector<double>(w.begin(), w.end()), &g);
  out.assign(g.begin(), g.end());
}

// Decaying learning rate: decentralised methods (sgp, dsync) only reach the exact optimum when the
// step shrinks, since each site's own gradient does not vanish at the optimum.
double lr_at(std::uint64_t k) { return 0.5 / (1.0 + k / 300.0); }

constexpr std::uint64_t kSteps = 3000;

}  // namespace

TEST_CASE("every algorithm trains logistic regression to within 1e-3 of the optimal loss", "[gossip][convergence]") {
  const Problem problem = make_problem();
  const double best = optimal_loss(problem);
  INFO("optimal loss " << best);
  REQUIRE(best > 0.0);
  std::vector<std::vector<float>> models(kSites, std::vector<float>(kDim, 0.0f));

  auto check_all = [&](const char* algorithm) {
    for (std::size_t r = 0; r < kSites; ++r) {
      INFO(algorithm << " site " << r << " loss " << global_loss(problem, models[r]) << " optimum " << best);
      CHECK(global_loss(problem, models[r]) - best < 1e-3);
    }
  };

  SECTION("allreduce") {
    SiteCluster cluster(kSites, MixerKind::kAverage);
    cluster.run([&](std::size_t r, MixChannel& channel) {
      std::vector<float> g;
      for (std::uint64_t k = 0; k < kSteps; ++k) {
        site_gradient(problem, r, models[r], g);
        average_now(channel, k, g, 60s);
        for (std::size_t i = 0; i < kDim; ++i) models[r][i] -= static_cast<float>(lr_at(k) * g[i]);
      }
    });
    check_all("allreduce");
  }
  SECTION("dts, momentum, D = 2, P = 2") {
    SiteCluster cluster(kSites, MixerKind::kAverage);
    cluster.run([&](std::size_t r, MixChannel& channel) {
      std::vector<float> u(kDim, 0.0f), g;
      DtsConfig config;
      config.delay = 2;
      config.period = 2;
      config.momentum = 0.5;
      config.reaverage_every = 500;
      Dts dts(config, channel, models[r], u);
      for (std::uint64_t k = 0; k < kSteps; ++k) {
        site_gradient(problem, r, models[r], g);
        dts.step(k, g, 0.5 * lr_at(k));
      }
      dts.finish();
    });
    check_all("dts");
  }
  SECTION("sgp, synchronous and overlapping") {
    for (bool overlap : {false, true}) {
      SiteCluster cluster(kSites, MixerKind::kPushSum);
      cluster.run([&](std::size_t r, MixChannel& channel) {
        DelayedMixingConfig config;
        config.overlap = overlap;
        config.delay = overlap ? 1 : 0;
        PushSum sgp(config, channel, models[r]);
        std::vector<float> g;
        for (std::uint64_t k = 0; k < kSteps; ++k) {
          site_gradient(problem, r, models[r], g);  // the gradient at z = x / w
          for (auto& v : g) v = static_cast<float>(lr_at(k) * v);
          sgp.step(k, g);
        }
        sgp.finish();
      });
      check_all(overlap ? "osgp" : "sgp");
    }
  }
  SECTION("dsync, plain and with delay D = 1") {
    for (std::uint32_t delay : {0u, 1u}) {
      SiteCluster cluster(kSites, MixerKind::kGroup);
      cluster.run([&](std::size_t r, MixChannel& channel) {
        DelayedMixingConfig config;
        config.delay = delay;
        config.reaverage_every = 500;
        DelayedMixing dsync(config, channel, models[r]);
        std::vector<float> g;
        for (std::uint64_t k = 0; k < kSteps; ++k) {
          site_gradient(problem, r, models[r], g);
          for (std::size_t i = 0; i < kDim; ++i) models[r][i] -= static_cast<float>(lr_at(k) * g[i]);
          dsync.after_step(k);
        }
        dsync.finish();
      });
      check_all(delay ? "dsync D=1" : "dsync");
    }
  }
}
