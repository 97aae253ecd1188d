// diloco-gossip (gossip::Diloco with the push-sum outer average, gossip/diloco.h) with several sites in
// one process on the in-memory transport and PushSumMixers: the gossip average reaches the exact mean
// over rounds, the sites' mean follows diloco's rule, the special case it reduces to (sgp's push-sum
// parameter averaging), the sign of the outer step, overlap, a death, and the knobs it refuses.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "gossip/diloco.h"
#include "gossip/push_sum.h"
#include "gossip/push_sum_mixer.h"
#include "dyadic_values.h"
#include "error/error.h"
#include "site_cluster.h"

using namespace meridian::gossip;
using meridian::gossip::testing::dyadic_start;
using meridian::gossip::testing::MixerKind;
using meridian::gossip::testing::SiteCluster;
using namespace std::chrono_literals;

namespace {

DilocoConfig gossip_config(std::uint32_t inner_steps, double outer_lr, double outer_momentum) {
  DilocoConfig config;
  config.inner_steps = inner_steps;
  config.outer_lr = outer_lr;
  config.outer_momentum = outer_momentum;
  config.outer_average = OuterAverage::kPushSum;
  return config;
}

// Each site's state at the end of a run.
struct Sites {
  std::vector<std::vector<float>> params, global, momentum;
  std::vector<double> weight;
  std::vector<std::uint64_t> outer_steps;
  explicit Sites(std::vector<std::vector<float>> start)
      : params(std::move(start)),
        global(params.size()),
        momentum(params.size()),
        weight(params.size()),
        outer_steps(params.size()) {}
  void record(std::size_t r, const Diloco& d) {
    global[r].assign(d.global_parameters().begin(), d.global_parameters().end());
    momentum[r].assign(d.outer_momentum().begin(), d.outer_momentum().end());
    weight[r] = d.push_sum_weight();
    outer_steps[r] = d.outer_steps();
  }
};

// Site r's inner step k on its parameters.
using Inner = std::function<void(std::size_t r, std::uint64_t k, std::span<float> params)>;

// Every site runs `steps` inner steps, each followed by after_step(k), then finish().
Sites run_sites(SiteCluster& cluster, const DilocoConfig& config, std::vector<std::vector<float>> start,
                std::uint64_t steps, const Inner& inner) {
  Sites sites(std::move(start));
  cluster.run([&](std::size_t r, MixChannel& channel) {
    Diloco diloco(config, channel, sites.params[r]);
    for (std::uint64_t k = 0; k < steps; ++k) {
      inner(r, k, sites.params[r]);
      diloco.after_step(k);
    }
    diloco.finish();
    sites.record(r, diloco);
  });
  return sites;
}

// n sites with PushSumMixers that take the graph's next entry at every outer step of H inner steps,
// as the daemon wires them.
std::unique_ptr<SiteCluster> gossip_sites(std::size_t n, std::uint32_t inner_steps, RoundTimeouts timeouts = {}) {
  return std::make_unique<SiteCluster>(n, MixerKind::kPushSum, timeouts, 1, RobustOptions{}, std::vector<std::size_t>{},
                                       100.0, CompressionSpec{}, 0, GridSpec{}, inner_steps);
}

void no_inner_step(std::size_t, std::uint64_t, std::span<float>) {}

// A pseudo-gradient that does not depend on the parameters, different on every site and step.
void fixed_move(std::size_t r, std::uint64_t k, std::span<float> params) {
  for (std::size_t i = 0; i < params.size(); ++i)
    params[i] -= 0.05f * static_cast<float>(std::sin(0.7 * k + 1.3 * r + 0.37 * i) + 0.1 * r);
}

// max over elements of (max over sites − min over sites).
double spread(const std::vector<std::vector<float>>& v) {
  double out = 0;
  for (std::size_t i = 0; i < v[0].size(); ++i) {
    double lo = v[0][i], hi = v[0][i];
    for (const auto& s : v) {
      lo = std::min<double>(lo, s[i]);
      hi = std::max<double>(hi, s[i]);
    }
    out = std::max(out, hi - lo);
  }
  return out;
}

}  // namespace

TEST_CASE("diloco-gossip's outer average is gossip: not the mean after one round, the exact mean over rounds",
          "[gossip][diloco][diloco-gossip][cluster]") {
  SECTION("4 sites, one graph cycle: exact, bit for bit") {
    // η = 1, μ = 0 and no inner progress: the outer step proposes θ_g itself, so the rounds are plain
    // push-sum on the starts. Dyadic values keep every share and sum exact; with K = 1 the two rounds of
    // a cycle (offsets 1, then 2) form a butterfly that leaves every site at the mean. H = 2 is the
    // graph's period here: the outer steps must still walk its entries, not mix the same pairs forever.
    const std::size_t n = 4, dim = 6;
    const auto start = dyadic_start(n, dim, 5);
    std::vector<float> mean(dim);
    for (std::size_t i = 0; i < dim; ++i) mean[i] = (start[0][i] + start[1][i] + start[2][i] + start[3][i]) / 4.0f;
    const auto after_one = run_sites(*gossip_sites(n, 2), gossip_config(2, 1.0, 0.0), start, 2, no_inner_step);
    CHECK(spread(after_one.global) > 0.0);  // one round mixes pairs only: no exact mean, no waiting on all
    const auto after_two = run_sites(*gossip_sites(n, 2), gossip_config(2, 1.0, 0.0), start, 4, no_inner_step);
    for (std::size_t r = 0; r < n; ++r) {
      CHECK(after_two.global[r] == mean);
      CHECK(after_two.params[r] == mean);  // τ = 0: θ ← θ_g
      CHECK(after_two.weight[r] == 1.0);
      CHECK(after_two.outer_steps[r] == 2);
    }
  }
  SECTION("5 sites, DiLoCo's defaults: the spread falls to 1e-6 of its start, at the mean of the starts") {
    // No inner progress: Δ = 0, m stays 0 and the proposals are the sites' θ_g, which push-sum pulls
    // together; Σ w·θ_g is conserved, so they meet at the mean.
    const std::size_t n = 5, dim = 4;
    std::vector<std::vector<float>> start(n);
    for (std::size_t r = 0; r < n; ++r)
      for (std::size_t i = 0; i < dim; ++i) start[r].push_back(static_cast<float>(std::cos(1.1 * r + 0.3 * i)));
    const auto sites = run_sites(*gossip_sites(n, 2), gossip_config(2, 0.7, 0.9), start, 2 * 60, no_inner_step);
    CHECK(spread(sites.global) <= 1e-6 * spread(start));
    for (std::size_t i = 0; i < dim; ++i) {
      double mean = 0;
      for (std::size_t r = 0; r < n; ++r) mean += start[r][i] / n;
      for (std::size_t r = 0; r < n; ++r) CHECK(sites.global[r][i] == Approx(mean).margin(1e-5));
    }
  }
}

TEST_CASE("diloco-gossip's sites keep their own θ_g and m, and their mean follows diloco's rule",
          "[gossip][diloco][diloco-gossip][cluster]") {
  // With parameter-independent inner steps the sites' Δ do not depend on where they are, so the mean
  // over the sites of (θ_g, m) must be diloco's (θ_g, m) on the same steps: the mixing conserves the
  // mass and, with w = 1, the mean. The sites themselves differ (gossip), within a bound.
  const std::size_t n = 4, dim = 5;
  const std::vector<std::vector<float>> start(n, std::vector<float>(dim, 0.5f));
  const std::uint64_t steps = 24;  // 8 outer steps of H = 3
  SiteCluster exact(n, MixerKind::kAverage);
  DilocoConfig exact_config;
  exact_config.inner_steps = 3;
  const auto reference = run_sites(exact, exact_config, start, steps, fixed_move);
  const auto sites = run_sites(*gossip_sites(n, 3), gossip_config(3, 0.7, 0.9), start, steps, fixed_move);
  CHECK(spread(sites.global) > 1e-4);  // not an exact mean
  CHECK(spread(sites.momentum) > 1e-4);
  for (std::size_t i = 0; i < dim; ++i) {
    double global = 0, momentum = 0;
    for (std::size_t r = 0; r < n; ++r) {
      global += sites.global[r][i] / n;
      momentum += sites.momentum[r][i] / n;
      CHECK(sites.weight[r] == 1.0);
    }
    CHECK(global == Approx(reference.global[0][i]).margin(1e-5));
    CHECK(momentum == Approx(reference.momentum[0][i]).margin(1e-5));
  }
}

TEST_CASE("diloco-gossip with H = 1, outer lr 1 and no momentum is push-sum parameter averaging (sgp)",
          "[gossip][diloco][diloco-gossip][cluster]") {
  // Each site descends its own quadratic ½·Σ c_i (θ_i − t_r,i)² with plain SGD, so the gradients depend
  // on the parameters; sgp (gossip/push_sum.h, D = 0) runs the same steps on the same graph. The float
  // operations are the same too (x − (x − θ) with w = 1, the same shares), so the bits are.
  const std::size_t n = 5, dim = 4;
  const std::uint64_t steps = 30;
  auto descend = [](std::size_t r, std::uint64_t, std::span<float> p) {
    for (std::size_t i = 0; i < p.size(); ++i) {
      const float target = static_cast<float>(std::cos(1.7 * r + 0.9 * i));
      p[i] -= 0.1f * (0.5f + 0.25f * static_cast<float>(i % 3)) * (p[i] - target);
    }
  };
  const std::vector<std::vector<float>> start(n, std::vector<float>(dim, 0.25f));
  const auto sites = run_sites(*gossip_sites(n, 1), gossip_config(1, 1.0, 0.0), start, steps, descend);

  SiteCluster sgp_cluster(n, MixerKind::kPushSum);
  std::vector<std::vector<float>> sgp_models = start;
  sgp_cluster.run([&](std::size_t r, MixChannel& channel) {
    PushSum sgp({}, channel, sgp_models[r]);
    for (std::uint64_t k = 0; k < steps; ++k) {
      descend(r, k, sgp_models[r]);
      sgp.step_in_place(k);
    }
    sgp.finish();
  });
  CHECK(spread(sites.params) > 1e-3);  // the sites still differ: the comparison is site by site
  for (std::size_t r = 0; r < n; ++r)
    for (std::size_t i = 0; i < dim; ++i) CHECK(sites.params[r][i] == sgp_models[r][i]);
}

TEST_CASE("diloco-gossip's outer step moves with the local update, not against it",
          "[gossip][diloco][diloco-gossip][cluster]") {
  // Two sites: one round on the graph is the exact mean. Site 0 moves by +d during the H steps, site 1
  // not at all. Site 0's own Δ is −d, its m becomes −d and its proposal θ_g + η·(1 + μ)·d; site 1
  // proposes θ_g. Both end at θ_g + η·(1 + μ)·d/2: with the local progress, as in diloco.
  const float d = 0.25f;
  const double lr = 0.5, mu = 0.5;
  SiteCluster cluster(2, MixerKind::kPushSum);
  const std::vector<std::vector<float>> start(2, std::vector<float>(3, 1.0f));
  const auto sites =
      run_sites(cluster, gossip_config(2, lr, mu), start, 2, [&](std::size_t r, std::uint64_t k, auto p) {
        if (r == 0 && k == 0)
          for (float& x : p) x += d;
      });
  const float expected = 1.0f + static_cast<float>(lr * (1 + mu) * d / 2);  // 1.09375
  for (std::size_t r = 0; r < 2; ++r)
    for (std::size_t i = 0; i < 3; ++i) {
      CHECK(sites.global[r][i] == expected);
      CHECK(sites.global[r][i] > 1.0f);
    }
  CHECK(sites.momentum[0] == std::vector<float>(3, -d));  // each site's own momentum
  CHECK(sites.momentum[1] == std::vector<float>(3, 0.0f));
}

TEST_CASE("diloco-gossip's overlap with compensation ends where no overlap does when Δ does not depend on θ",
          "[gossip][diloco][diloco-gossip][cluster]") {
  const std::size_t n = 4, dim = 3;
  const std::vector<std::vector<float>> start(n, std::vector<float>(dim, 0.0f));
  const auto plain = run_sites(*gossip_sites(n, 4), gossip_config(4, 0.7, 0.9), start, 24, fixed_move);
  for (std::uint32_t tau : {1u, 4u}) {
    INFO("τ = " << tau);
    DilocoConfig config = gossip_config(4, 0.7, 0.9);
    config.overlap = tau;
    const auto overlapped = run_sites(*gossip_sites(n, 4), config, start, 24, fixed_move);
    for (std::size_t r = 0; r < n; ++r)
      for (std::size_t i = 0; i < dim; ++i) {
        CHECK(overlapped.params[r][i] == Approx(plain.params[r][i]).margin(1e-5));
        CHECK(overlapped.global[r][i] == Approx(plain.global[r][i]).margin(1e-5));
      }
  }
}

TEST_CASE("a dead diloco-gossip site does not stop the others, and the survivors still reach consensus",
          "[gossip][diloco][diloco-gossip][faults][cluster]") {
  RoundTimeouts timeouts;
  timeouts.round = 50ms;
  const std::size_t n = 4, dead = 1, dim = 3;
  auto sites = gossip_sites(n, 2, timeouts);
  SiteCluster& cluster = *sites;
  const auto names = cluster.names();
  // Plays membership: once a survivor missed a share, announces the survivors' view from step 40.
  std::thread membership([&] {
    for (int i = 0; i < 60000; ++i) {
      std::uint64_t missed = 0;
      for (std::size_t r = 0; r < n; ++r)
        if (r != dead) missed += static_cast<PushSumMixer&>(*cluster.site(r).algorithm).missing();
      if (missed > 0) break;
      std::this_thread::sleep_for(1ms);
    }
    cluster.network().announce(meridian::peer::View::of({names[0], names[2], names[3]}, 1, 40));
  });
  // μ = 0.5: once the inner progress stops, what the sites' own momenta still propose fades fast.
  DilocoConfig config = gossip_config(2, 0.7, 0.5);
  config.overlap = 1;
  const std::uint64_t steps = 160, moving = 60;  // inner progress until step 60, then none
  std::vector<std::vector<float>> params(n), global(n);
  std::vector<std::uint64_t> outer(n);
  std::vector<double> weight(n);
  cluster.run([&](std::size_t r, MixChannel& channel) {
    params[r].assign(dim, static_cast<float>(r));
    Diloco diloco(config, channel, params[r]);
    for (std::uint64_t k = 0; k < steps; ++k) {
      if (r == dead && k == 10) {
        cluster.network().kill(names[r]);
        return;
      }
      if (k < moving) fixed_move(r, k, params[r]);
      diloco.after_step(k);
    }
    diloco.finish();
    global[r].assign(diloco.global_parameters().begin(), diloco.global_parameters().end());
    outer[r] = diloco.outer_steps();
    weight[r] = diloco.push_sum_weight();
  });
  membership.join();
  std::uint64_t missed = 0;
  std::vector<std::vector<float>> survivors;
  for (std::size_t r = 0; r < n; ++r) {
    if (r == dead) continue;
    missed += static_cast<PushSumMixer&>(*cluster.site(r).algorithm).missing();
    CHECK(outer[r] == steps / 2);  // every outer step of the run
    CHECK(weight[r] > 0.0);
    for (float x : global[r]) CHECK(std::isfinite(x));
    survivors.push_back(global[r]);
  }
  CHECK(missed > 0);  // the dead site's shares were waited for until the deadline, then given up on
  CHECK(spread(survivors) < 1e-6);
}

TEST_CASE("diloco-gossip refuses fragments and a compressed trainer wire, with reasons",
          "[gossip][diloco][diloco-gossip][unit]") {
  MixChannel channel;
  std::vector<float> params(4, 0.0f);
  auto refusal = [&](std::uint32_t fragments, const char* wire) -> std::string {
    DilocoConfig config = gossip_config(4, 0.7, 0.9);
    config.fragments = fragments;
    config.wire = *parse_compression(wire);
    try {
      Diloco d(config, channel, params);
    } catch (const meridian::error::UserError& e) {
      return e.what();
    }
    return "";
  };
  CHECK_THAT(refusal(2, "none"), Catch::Contains("F = 2 fragments") && Catch::Contains("use F = 1"));
  CHECK_THAT(refusal(1, "fp16"), Catch::Contains("rounds them to fp16 itself), got wire fp16"));
  CHECK_THAT(refusal(1, "int8"), Catch::Contains("got wire int8"));
  CHECK(refusal(1, "none").empty());
  // The knobs diloco checks, diloco-gossip checks too.
  CHECK_THROWS_AS(Diloco(gossip_config(4, 0.0, 0.9), channel, params), meridian::error::UserError);
  CHECK_THROWS_AS(Diloco(gossip_config(4, 0.7, 1.0), channel, params), meridian::error::UserError);
  Diloco d(gossip_config(4, 0.7, 0.9), channel, params);
  CHECK(d.push_sum_weight() == 1.0);
  CHECK_THROWS_AS(d.set_push_sum_weight(0.0), meridian::error::UserError);
  CHECK_THROWS_AS(d.set_push_sum_weight(std::nan("")), meridian::error::UserError);
  d.set_push_sum_weight(0.5);
  CHECK(d.push_sum_weight() == 0.5);
}
