// The factor sgp scales its update by (gossip/push_sum_step_scale.h): w in a synchronous run, w·g in an
// overlap run, with g bounded whatever happens to the mass, and large enough that the consensus of an
// overlap run moves at the rate of a synchronous one.
#include <catch2/catch.hpp>

#include <bit>
#include <cstdint>
#include <random>
#include <vector>

#include "gossip/exponential_graph.h"
#include "gossip/push_sum_step_scale.h"

using namespace meridian::gossip;

namespace {

// Push-sum on scalars with links that take whole steps: n sites on the exponential graph (K = 1); at
// step k every site subtracts factor·1 from its numerator (the same unit update everywhere), then sends
// half of (x, w) to its out-peer, where it lands `delay(from, to)` steps later (≥ 1, so shares are in
// flight as in an overlap run). `lost(from, to)` drops a share instead (a dead link). Returns the
// consensus per step, (Σx + the numerators in flight) / n, and each site's largest factor / w (how
// far the step moved its z, in units of the update).
struct ScalarRun {
  std::vector<double> consensus;      // [step]
  std::vector<double> max_z_step;     // [site]
  std::vector<double> final_weight;   // [site]
};

template <class Delay, class Lost>
ScalarRun run_scalar(std::size_t n, std::uint64_t steps, bool gain, Delay delay, Lost lost) {
  struct Share {
    std::uint64_t lands;
    std::size_t to;
    double x, w;
  };
  std::vector<double> x(n, 0.0), w(n, 1.0);
  std::vector<PushSumStepScale> scale(n, PushSumStepScale(true));
  std::vector<Share> flight;
  ScalarRun run{{}, std::vector<double>(n, 0.0), {}};
  for (std::uint64_t k = 0; k < steps; ++k) {
    for (std::size_t i = 0; i < n; ++i) {
      const double s = gain ? scale[i].factor(w[i]) : w[i];
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

double rate(const ScalarRun& run, std::uint64_t from, std::uint64_t to) {
  return (run.consensus[from] - run.consensus[to]) / static_cast<double>(to - from);
}

}  // namespace

TEST_CASE("without overlap the push-sum step factor is the weight, bit for bit", "[gossip][sgp]") {
  PushSumStepScale scale(false);
  for (double w : {1.0, 0.5, 0.25, 0.29, 1.7, 1e-6, 1.0 / 3.0}) {
    INFO("w=" << w);
    CHECK(std::bit_cast<std::uint64_t>(scale.factor(w)) == std::bit_cast<std::uint64_t>(w));
    CHECK(scale.gain() == 1.0);
  }
}

TEST_CASE("in an overlap run the push-sum step never moves z by more than the bound, whatever the mass lost",
          "[gossip][sgp][faults]") {
  // A permanent mass loss (w stuck at 1/2, or all but gone) and a weight that jumps about: the step
  // moves z by factor / w = g ≤ kMaxGain at every step.
  for (double stuck : {0.5, 0.1, 1e-9}) {
    INFO("w=" << stuck);
    PushSumStepScale scale(true);
    double largest = 0;
    for (int k = 0; k < 5000; ++k) largest = std::max(largest, scale.factor(stuck) / stuck);
    CHECK(largest <= PushSumStepScale::kMaxGain);
    CHECK(scale.gain() == Approx(std::min(1.0 / stuck, PushSumStepScale::kMaxGain)));
  }
  std::mt19937 rng(3);
  std::uniform_real_distribution<double> weight(1e-6, 3.0);
  PushSumStepScale scale(true);
  for (int k = 0; k < 5000; ++k) {
    const double w = weight(rng);
    const double g = scale.factor(w) / w;
    REQUIRE(g <= PushSumStepScale::kMaxGain * (1 + 1e-15));
    REQUIRE(g > 0);
  }
  // No mass in flight and none lost (w = 1 throughout): the plain step.
  PushSumStepScale steady(true);
  for (int k = 0; k < 100; ++k) REQUIRE(steady.factor(1.0) == 1.0);
}

TEST_CASE("with shares in flight the gain restores the consensus rate that the w-scaled step loses",
          "[gossip][sgp]") {
  // Links of 1 to 2 steps, different per direction so the sites hold different weights, as measured
  // between sites on one machine; every site's update is 1 per step, so a synchronous run's consensus
  // moves by 1 per step.
  const std::size_t n = 4;
  const std::uint64_t steps = 2000;
  auto delay = [](std::size_t from, std::size_t to) -> std::uint64_t { return 1 + (from + 2 * to) % 2; };
  auto none = [](std::size_t, std::size_t) { return false; };
  const ScalarRun scaled = run_scalar(n, steps, false, delay, none);
  const ScalarRun gained = run_scalar(n, steps, true, delay, none);
  const double slow = rate(scaled, 1000, steps - 1), recovered = rate(gained, 1000, steps - 1);
  INFO("consensus per step: w-scaled " << slow << ", with the gain " << recovered);
  CHECK(slow < 0.8);  // the loss this fixes: mass in flight takes no step
  CHECK(recovered == Approx(1.0).epsilon(0.02));
  for (double g : gained.max_z_step) CHECK(g <= PushSumStepScale::kMaxGain);
}

TEST_CASE("with longer flights the gain is capped and the consensus rate is recovered only in part",
          "[gossip][sgp]") {
  // Links of 4 steps: a site holds about 1/3 of its mass, more than kMaxGain would make up.
  const std::size_t n = 8;
  auto delay = [](std::size_t, std::size_t) -> std::uint64_t { return 4; };
  auto none = [](std::size_t, std::size_t) { return false; };
  const ScalarRun scaled = run_scalar(n, 2000, false, delay, none);
  const ScalarRun gained = run_scalar(n, 2000, true, delay, none);
  const double slow = rate(scaled, 1000, 1999), capped = rate(gained, 1000, 1999);
  INFO("consensus per step: w-scaled " << slow << ", with the gain " << capped);
  CHECK(capped == Approx(PushSumStepScale::kMaxGain * slow).epsilon(0.02));
  CHECK(capped < 1.0);
  for (double g : gained.max_z_step) CHECK(g <= PushSumStepScale::kMaxGain);
}

TEST_CASE("a site that loses mass to a dead link in an overlap run trains at most kMaxGain times faster",
          "[gossip][sgp][faults]") {
  // Every share site 0 sends to site 1 is lost: the mass drains away, the weights fall without a
  // floor, and the gain stops at the bound.
  const std::size_t n = 4;
  auto delay = [](std::size_t, std::size_t) -> std::uint64_t { return 1; };
  auto lost = [](std::size_t from, std::size_t to) { return from == 0 && to == 1; };
  const ScalarRun run = run_scalar(n, 400, true, delay, lost);
  for (double w : run.final_weight) CHECK(w < 0.1);
  for (double g : run.max_z_step) {
    CHECK(g <= PushSumStepScale::kMaxGain);
    CHECK(g == Approx(PushSumStepScale::kMaxGain));
  }
}
