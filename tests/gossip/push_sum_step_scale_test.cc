// The factor sgp scales its update by (gossip/push_sum_step_scale.h): w without shares in flight, w·g
// with them, g bounded whatever happens to the mass, and large enough that the consensus of an overlap
// run moves at the rate of a synchronous one.
#include <catch2/catch.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <random>
#include <stdexcept>
#include <vector>

#include "error/error.h"
#include "gossip/exponential_graph.h"
#include "gossip/push_sum.h"
#include "gossip/push_sum_step_scale.h"
#include "site_cluster.h"

using namespace meridian::gossip;
using meridian::gossip::testing::MixerKind;
using meridian::gossip::testing::SiteCluster;

namespace {

// Push-sum on scalars with links that take whole steps: n sites on the exponential graph (K = 1); at
// step k every site subtracts factor·1 from its numerator (the same unit update everywhere), then sends
// half of (x, w) to its out-peer, where it is added `delay(from, to)` ≥ 1 steps later, so that a share
// is in flight over delay − 1 steps (a mixer with staleness bound delay − 1). `lost(from, to)` drops
// the share instead (a dead link). Records the consensus per step, (Σx + the numerators in flight) / n,
// each site's largest factor / w (how far a step moved its z, in units of the update) and the final
// weights.
struct ScalarRun {
  std::vector<double> consensus;     // [step]
  std::vector<double> max_z_step;    // [site]
  std::vector<double> final_weight;  // [site]
};

template <class Delay, class Lost>
ScalarRun run_scalar(std::size_t n, std::uint64_t steps, const PushSumStepScale& rule, Delay delay, Lost lost) {
  struct Share {
    std::uint64_t lands;
    std::size_t to;
    double x, w;
  };
  std::vector<double> x(n, 0.0), w(n, 1.0);
  std::vector<PushSumStepScale> scale(n, rule);
  std::vector<Share> flight;
  ScalarRun run{{}, std::vector<double>(n, 0.0), {}};
  for (std::uint64_t k = 0; k < steps; ++k) {
    for (std::size_t i = 0; i < n; ++i) {
      const double s = scale[i].factor(w[i]);
      x[i] -= s;
      run.max_z_step[i] = std::max(run.max_z_step[i], s / w[i]);
    }
    for (std::size_t i = 0; i < n; ++i) {
      x[i] /= 2;
      w[i] /= 2;
      const std::size_t to = exponential_out_peers(n, i, k, 1).at(0);
      if (!lost(i, to)) flight.push_back({k + delay(i, to), to, x[i], w[i]});
    }
    std::vector<Share> still;
    for (const Share& share : flight) {
      if (share.lands <= k + 1) {
        x[share.to] += share.x;
        w[share.to] += share.w;
      } else {
        still.push_back(share);
      }
    }
    flight = std::move(still);
    double total = 0;
    for (double v : x) total += v;
    for (const Share& share : flight) total += share.x;
    run.consensus.push_back(total / static_cast<double>(n));
  }
  run.final_weight = w;
  return run;
}

// Consensus movement per step over the second half of the run (past the start-up).
double rate(const ScalarRun& run) {
  const std::size_t from = run.consensus.size() / 2, to = run.consensus.size() - 1;
  return (run.consensus[from] - run.consensus[to]) / static_cast<double>(to - from);
}

const auto kNoLoss = [](std::size_t, std::size_t) { return false; };

// factor / w is g up to the rounding of w·g and of the quotient.
constexpr double kRounding = 1e-12;

// Runs `body` on one site's PushSum (overlap, D = 1) over a 3-element model starting at 0, with `scale`.
// Alone, the site keeps whatever weight it is restored with: it has nobody to mix with.
void with_lone_overlap_site(PushSumStepScale scale, const std::function<void(PushSum&, std::vector<float>&)>& body) {
  SiteCluster cluster(1, MixerKind::kPushSum);
  cluster.run([&](std::size_t, MixChannel& channel) {
    DelayedMixingConfig config;
    config.delay = 1;
    config.overlap = true;
    std::vector<float> model(3, 0.0f);
    PushSum sgp(config, channel, model, scale);
    body(sgp, model);
  });
}

}  // namespace

TEST_CASE("the push-sum gain bound is what shares in flight can account for, at most kMaxGain", "[gossip][sgp][unit]") {
  CHECK(PushSumStepScale::gain_bound(0, 1) == 1.0);  // τ = 1: nothing in flight when a mix is folded in
  CHECK(PushSumStepScale::gain_bound(0, 3) == 1.0);
  CHECK(PushSumStepScale::gain_bound(1, 1) == 1.5);  // τ = 2, K = 1
  CHECK(PushSumStepScale::gain_bound(1, 3) == 1.75);
  CHECK(PushSumStepScale::gain_bound(2, 1) == 2.0);  // τ = 3, K = 1
  CHECK(PushSumStepScale::gain_bound(7, 1) == PushSumStepScale::kMaxGain);
  CHECK(PushSumStepScale::gain_bound(1000, 7) == PushSumStepScale::kMaxGain);
}

TEST_CASE("without a gain the push-sum step factor is the weight, bit for bit", "[gossip][sgp][unit]") {
  for (const PushSumStepScale& rule : {PushSumStepScale(), PushSumStepScale(0, 1), PushSumStepScale(0, 3)}) {
    PushSumStepScale scale = rule;
    for (double w : {1.0, 0.5, 0.25, 0.29, 1.7, 1e-6, 1.0 / 3.0}) {
      INFO("w=" << w);
      CHECK(std::bit_cast<std::uint64_t>(scale.factor(w)) == std::bit_cast<std::uint64_t>(w));
      CHECK(scale.gain() == 1.0);
    }
  }
}

TEST_CASE("the push-sum step never moves z by more than the gain bound, whatever the mass lost",
          "[gossip][sgp][faults][unit]") {
  // A permanent mass loss (w stuck at 1/2, or all but gone) and a weight that jumps about: the step
  // moves z by factor / w = g ≤ G at every step, and never by less than the update.
  for (std::uint64_t staleness : {1u, 2u, 7u}) {
    const double bound = PushSumStepScale::gain_bound(staleness, 1);
    for (double stuck : {0.5, 0.1, 1e-9}) {
      INFO("staleness=" << staleness << " w=" << stuck);
      PushSumStepScale scale(staleness, 1);
      double largest = 0;
      for (int k = 0; k < 5000; ++k) largest = std::max(largest, scale.factor(stuck) / stuck);
      CHECK(largest <= bound * (1 + kRounding));
      CHECK(scale.gain() == Approx(std::min(1.0 / stuck, bound)));
    }
    std::mt19937 rng(3);
    std::uniform_real_distribution<double> weight(1e-6, 3.0);
    PushSumStepScale scale(staleness, 1);
    for (int k = 0; k < 5000; ++k) {
      const double w = weight(rng);
      const double g = scale.factor(w) / w;
      REQUIRE(g <= bound * (1 + kRounding));
      REQUIRE(g >= 1 - kRounding);
    }
    // No mass in flight and none lost (w = 1 throughout): the plain step.
    PushSumStepScale steady(staleness, 1);
    for (int k = 0; k < 100; ++k) REQUIRE(steady.factor(1.0) == 1.0);
  }
}

TEST_CASE("with shares in flight the gain restores the consensus rate that the w-scaled step loses",
          "[gossip][sgp][unit]") {
  // Every share in flight for 2 steps (τ = 3): a site holds half its mass, the w-scaled step moves the
  // consensus by half the update, and G = 2 makes up for all of it. A synchronous run's consensus
  // moves by 1 per step (every site's update is 1).
  const std::size_t n = 4;
  auto delay = [](std::size_t, std::size_t) -> std::uint64_t { return 3; };
  const ScalarRun scaled = run_scalar(n, 2000, PushSumStepScale(), delay, kNoLoss);
  const ScalarRun gained = run_scalar(n, 2000, PushSumStepScale(2, 1), delay, kNoLoss);
  INFO("consensus per step: w-scaled " << rate(scaled) << ", with the gain " << rate(gained));
  CHECK(rate(scaled) == Approx(0.5).epsilon(0.01));
  CHECK(rate(gained) == Approx(1.0).epsilon(0.01));
  for (double g : gained.max_z_step) CHECK(g <= 2.0 * (1 + kRounding));
}

TEST_CASE("with links of different lengths the gain recovers most of the consensus rate", "[gossip][sgp][unit]") {
  // Shares in flight for 0 to 2 steps, different per direction, so the sites hold different weights
  // (as between sites that run at different speeds).
  const std::size_t n = 8;
  auto delay = [](std::size_t from, std::size_t to) -> std::uint64_t { return 1 + (from + 2 * to) % 3; };
  const ScalarRun scaled = run_scalar(n, 2000, PushSumStepScale(), delay, kNoLoss);
  const ScalarRun gained = run_scalar(n, 2000, PushSumStepScale(2, 1), delay, kNoLoss);
  INFO("consensus per step: w-scaled " << rate(scaled) << ", with the gain " << rate(gained));
  CHECK(rate(scaled) < 0.8);
  CHECK(rate(gained) > 0.95);
  CHECK(rate(gained) < 1.05);
  for (double g : gained.max_z_step) CHECK(g <= 2.0 * (1 + kRounding));
}

TEST_CASE("with longer flights than the gain bound allows the consensus rate is recovered only in part",
          "[gossip][sgp][unit]") {
  // τ = 8 with shares in flight 7 steps: a site holds 2/9 of its mass, and G = kMaxGain = 2.
  const std::size_t n = 8;
  auto delay = [](std::size_t, std::size_t) -> std::uint64_t { return 8; };
  const ScalarRun scaled = run_scalar(n, 2000, PushSumStepScale(), delay, kNoLoss);
  const ScalarRun gained = run_scalar(n, 2000, PushSumStepScale(7, 1), delay, kNoLoss);
  INFO("consensus per step: w-scaled " << rate(scaled) << ", with the gain " << rate(gained));
  CHECK(rate(scaled) == Approx(2.0 / 9.0).epsilon(0.01));
  CHECK(rate(gained) == Approx(PushSumStepScale::kMaxGain * 2.0 / 9.0).epsilon(0.01));
  for (double g : gained.max_z_step) CHECK(g <= PushSumStepScale::kMaxGain * (1 + kRounding));
}

TEST_CASE("a site that loses mass to a dead link trains at most G times faster, and τ = 1 not at all",
          "[gossip][sgp][faults][unit]") {
  // Every share site 0 sends to site 1 is lost: the mass drains away and the weights fall without a
  // floor. With shares in flight 2 steps (τ = 3) the gain stops at G = 2; with none in flight (τ = 1),
  // the case of the partition in docs/reliability.md, there is no gain at all.
  const std::size_t n = 4;
  auto lost = [](std::size_t from, std::size_t to) { return from == 0 && to == 1; };
  {
    auto delay = [](std::size_t, std::size_t) -> std::uint64_t { return 3; };
    const ScalarRun run = run_scalar(n, 400, PushSumStepScale(2, 1), delay, lost);
    for (double w : run.final_weight) CHECK(w < 0.1);
    for (double g : run.max_z_step) CHECK(g == Approx(2.0));
  }
  {
    auto delay = [](std::size_t, std::size_t) -> std::uint64_t { return 1; };
    const ScalarRun run = run_scalar(n, 400, PushSumStepScale(0, 1), delay, lost);
    for (double w : run.final_weight) CHECK(w < 0.1);
    for (double g : run.max_z_step) CHECK(g == 1.0);
  }
}

TEST_CASE("PushSum moves z by the gain times the update with the scale it is given", "[gossip][sgp][unit]") {
  // One site resumed with half its mass (w = 1/2 stays: it has nobody to mix with). The default scale
  // moves z by the update; a scale with G = 2 (τ = 3, K = 1) moves it by 1/ŵ, which grows to 2 as ŵ
  // settles at 1/2.
  for (bool gain : {false, true}) {
    INFO("gain=" << gain);
    const PushSumStepScale scale = gain ? PushSumStepScale(2, 1) : PushSumStepScale();
    with_lone_overlap_site(scale, [&](PushSum& sgp, std::vector<float>& model) {
      const std::vector<float> start(3, 0.0f), update(3, 1.0f / 1024);
      sgp.restore(start, 0.5);
      float before = model[0];
      for (std::uint64_t k = 0; k < 400; ++k) {
        before = model[0];
        sgp.step(k, update);
      }
      CHECK(sgp.weight() == 0.5);
      const double moved = (before - model[0]) * 1024.0;
      if (gain) {
        CHECK(moved == Approx(2.0).epsilon(1e-3));
        CHECK(sgp.step_scale().gain() == Approx(2.0).epsilon(1e-3));
      } else {
        CHECK(moved == Approx(1.0).epsilon(1e-3));
      }
    });
  }
}

TEST_CASE("a step scale resumed from its weight average continues bit for bit", "[gossip][sgp][unit]") {
  // A checkpoint stores ŵ; a site restarted from it must take the steps the running one would have
  // taken, not build its gain up again from ŵ = 1.
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> weight(0.3, 0.9);
  PushSumStepScale running(4, 1);
  for (int k = 0; k < 200; ++k) running.factor(weight(rng));
  REQUIRE(running.weight_average() < 0.9);

  PushSumStepScale resumed(4, 1);
  resumed.resume(running.weight_average());
  CHECK(resumed.gain() == running.gain());
  PushSumStepScale fresh(4, 1);
  bool fresh_differs = false;
  for (int k = 0; k < 50; ++k) {
    const double w = weight(rng);
    const double expected = running.factor(w);
    CHECK(std::bit_cast<std::uint64_t>(resumed.factor(w)) == std::bit_cast<std::uint64_t>(expected));
    fresh_differs = fresh_differs || fresh.factor(w) != expected;
  }
  CHECK(fresh_differs);

  CHECK_THROWS_AS(resumed.resume(0.0), meridian::error::UserError);
  CHECK_THROWS_AS(resumed.resume(-1.0), meridian::error::UserError);
  CHECK_THROWS_AS(resumed.resume(std::nan("")), meridian::error::UserError);
  CHECK_THROWS_AS(resumed.resume(std::numeric_limits<double>::infinity()), meridian::error::UserError);
}

TEST_CASE("PushSum restored with a weight average steps with that gain from the first step", "[gossip][sgp][unit]") {
  with_lone_overlap_site(PushSumStepScale(2, 1), [](PushSum& sgp, std::vector<float>& model) {
    const std::vector<float> start(3, 0.0f), update(3, 1.0f / 1024);
    sgp.restore(start, 0.5, 0.5);
    CHECK(sgp.weight_average() == 0.5);
    sgp.step(0, update);
    CHECK((0.0f - model[0]) * 1024.0 == Approx(2.0).epsilon(1e-6));
    CHECK_THROWS_AS(sgp.restore(start, 0.5, 0.0), meridian::error::UserError);
  });
}
