// Every mixer trains the same model to the same optimum: L2-regularised logistic regression on a
// synthetic linearly separable problem (tests/gossip/logistic_problem.h), 8 sites (in-memory transport,
// a trainer and a communication thread per site).
#include <catch2/catch.hpp>

#include <array>
#include <cmath>
#include <random>

#include "gossip/delayed_mixing.h"
#include "gossip/dts.h"
#include "gossip/push_sum.h"
#include "gossip/synchronous_average.h"
#include "logistic_problem.h"
#include "site_cluster.h"

using namespace meridian::gossip;
using meridian::gossip::testing::MixerKind;
using meridian::gossip::testing::SiteCluster;
using namespace std::chrono_literals;

namespace {

using namespace meridian::gossip::testing;

constexpr std::uint64_t kSteps = 3000;

}  // namespace

TEST_CASE("every algorithm trains logistic regression to within 1e-3 of the optimal loss",
          "[gossip][convergence][cluster]") {
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
