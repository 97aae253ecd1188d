// Shapes that change during a run (a shape chosen from the network: daemon/algorithms/auto_shape.h),
// every site switching at the same step: dts finishes what is in flight and goes on with the new D and
// P, diloco's exchanges keep the overlap they started with. With gradients that do not depend on the
// parameters, exact compensation makes either end where the unchanged algorithm ends.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <span>
#include <tuple>
#include <utility>

#include "gossip/diloco.h"
#include "gossip/dts.h"
#include "allreduce_reference.h"
#include "site_cluster.h"

using namespace meridian::gossip;
using meridian::gossip::testing::MixerKind;
using meridian::gossip::testing::SiteCluster;

namespace {

constexpr std::size_t kDim = 6;
constexpr std::uint64_t kSteps = 48;

float gradient(std::uint64_t k, std::size_t site, std::size_t i) {
  return static_cast<float>(std::sin(0.7 * k + 1.3 * site + 0.37 * i) + 0.1 * site);
}
double learning_rate(std::uint64_t k) { return 0.1 / (1.0 + 0.05 * k); }

double max_error(const std::vector<float>& got, const std::vector<double>& want) {
  double worst = 0;
  for (std::size_t i = 0; i < got.size(); ++i)
    worst = std::max(worst, std::abs(got[i] - want[i]) / std::max(1.0, std::abs(want[i])));
  return worst;
}

using Shapes = std::map<std::uint64_t, std::pair<std::uint32_t, std::uint32_t>>;  // step → (D, P)

}  // namespace

TEST_CASE("dts switching shapes mid-run at the same step on every site still reaches allreduce's parameters",
          "[gossip][dts][auto_shape][cluster]") {
  const std::size_t sites = 3;
  // Switches inside a window, at a window start, to a shorter and to a longer shape, to P = 1.
  const std::vector<Shapes> schedules{
      {{13, {3, 8}}, {29, {2, 3}}},
      {{16, {1, 2}}, {30, {5, 4}}, {41, {0, 1}}},
      {{7, {2, 1}}, {20, {2, 16}}},
  };
  for (auto [exchange, m] : std::vector<std::pair<MixerKind, double>>{
           {MixerKind::kAverage, 0.0}, {MixerKind::kAverage, 0.9}, {MixerKind::kDirectMean, 0.9}}) {
    const double momentum = m;  // a plain variable, for the lambda below
    const auto reference =
        meridian::gossip::testing::allreduce_momentum_reference(sites, kDim, kSteps, m, learning_rate, gradient);
    for (std::size_t s = 0; s < schedules.size(); ++s) {
      const Shapes& shapes = schedules[s];
      SiteCluster cluster(sites, exchange);
      std::vector<std::vector<float>> params(sites, std::vector<float>(kDim, 1.0f));
      std::vector<std::size_t> left(sites);
      std::vector<std::pair<std::uint32_t, std::uint32_t>> last(sites);
      cluster.run([&](std::size_t r, MixChannel& channel) {
        DtsConfig config;
        config.delay = 2;
        config.period = 4;
        config.momentum = momentum;
        config.exact_window_mean = true;
        config.reaverage_every = 10;
        std::vector<float> u(kDim, 0.0f), g(kDim);
        Dts dts(config, channel, params[r], u);
        for (std::uint64_t k = 0; k < kSteps; ++k) {
          if (auto it = shapes.find(k); it != shapes.end()) dts.reshape(k, it->second.first, it->second.second);
          for (std::size_t i = 0; i < kDim; ++i) g[i] = gradient(k, r, i);
          dts.step(k, g, learning_rate(k));
        }
        dts.finish();
        left[r] = dts.in_flight();
        last[r] = {dts.delay(), dts.period()};
      });
      INFO((exchange == MixerKind::kAverage ? "ring" : "direct") << " m=" << m << " schedule " << s);
      for (std::size_t r = 0; r < sites; ++r) {
        CHECK(left[r] == 0);
        CHECK(last[r] == shapes.rbegin()->second);
        CHECK(max_error(params[r], reference) < 2e-5);
      }
    }
  }
}

TEST_CASE("dts reshaped to its own shape changes nothing and waits for nothing", "[gossip][dts][auto_shape][cluster]") {
  SiteCluster cluster(2, MixerKind::kAverage);
  std::vector<std::vector<float>> params(2, std::vector<float>(kDim, 1.0f));
  std::vector<std::size_t> in_flight(2);
  cluster.run([&](std::size_t r, MixChannel& channel) {
    DtsConfig config;
    config.delay = 3;
    config.period = 4;
    std::vector<float> u, g(kDim);
    Dts dts(config, channel, params[r], u);
    for (std::uint64_t k = 0; k < 14; ++k) {
      for (std::size_t i = 0; i < kDim; ++i) g[i] = gradient(k, r, i);
      dts.step(k, g, 0.1);
    }
    dts.reshape(14, 3, 4);
    in_flight[r] = dts.in_flight();  // the window closed after step 11 is still in flight
    dts.finish();
  });
  CHECK(in_flight[0] == 1);
  CHECK(in_flight[1] == 1);
}

TEST_CASE(
    "diloco whose overlap changes mid-run ends where it ends without overlap, when gradients do not depend on "
    "the parameters",
    "[gossip][diloco][auto_shape][cluster]") {
  const std::size_t sites = 3;
  const std::uint64_t steps = 40;
  auto inner = [](std::size_t r, std::uint64_t k, std::span<float> params) {
    for (std::size_t i = 0; i < params.size(); ++i)
      params[i] -= 0.05f * static_cast<float>(std::sin(0.7 * k + 1.3 * r + 0.37 * i) + 0.1 * r);
  };
  // step → τ from that step on; the first entry is the starting overlap.
  auto run = [&](const std::map<std::uint64_t, std::uint32_t>& overlaps) {
    SiteCluster cluster(sites, MixerKind::kAverage);
    std::vector<std::vector<float>> params(sites, std::vector<float>(kDim, 1.0f)), global(sites);
    std::vector<std::size_t> max_in_flight(sites);
    cluster.run([&](std::size_t r, MixChannel& channel) {
      DilocoConfig config;
      config.inner_steps = 4;
      config.fragments = 2;
      config.overlap = overlaps.begin()->second;
      Diloco diloco(config, channel, params[r]);
      for (std::uint64_t k = 0; k < steps; ++k) {
        if (auto it = overlaps.find(k); it != overlaps.end()) diloco.set_overlap(it->second);
        inner(r, k, params[r]);
        diloco.after_step(k);
        max_in_flight[r] = std::max(max_in_flight[r], diloco.in_flight());
      }
      diloco.finish();
      global[r].assign(diloco.global_parameters().begin(), diloco.global_parameters().end());
    });
    return std::tuple(params, global, *std::max_element(max_in_flight.begin(), max_in_flight.end()));
  };
  const auto [plain, plain_global, plain_in_flight] = run({{0, 0}});
  CHECK(plain_in_flight == 0);
  for (const auto& overlaps : std::vector<std::map<std::uint64_t, std::uint32_t>>{
           {{0, 0}, {9, 3}, {22, 1}}, {{0, 4}, {13, 0}, {27, 2}}, {{0, 1}, {20, 4}}}) {
    const auto [got, got_global, in_flight] = run(overlaps);
    INFO("overlap switches at steps " << std::next(overlaps.begin())->first);
    CHECK(in_flight >= 1);
    for (std::size_t r = 0; r < sites; ++r)
      for (std::size_t i = 0; i < kDim; ++i) {
        CHECK(got[r][i] == Approx(plain[r][i]).margin(2e-6));
        CHECK(got_global[r][i] == Approx(plain_global[r][i]).margin(2e-6));
      }
  }
  // τ beyond H is refused like at construction.
  SiteCluster cluster(1, MixerKind::kAverage);
  std::vector<float> params(kDim, 1.0f);
  DilocoConfig config;
  config.inner_steps = 4;
  Diloco diloco(config, *cluster.site(0).channel, params);
  CHECK_THROWS(diloco.set_overlap(5));
  CHECK_NOTHROW(diloco.set_overlap(4));
}
