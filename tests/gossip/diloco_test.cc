// diloco (gossip/diloco.h) with several sites in one process on the in-memory transport: the outer
// mean, the special cases it must reduce to, the sign of the outer step, overlap, fragments, the wire
// precisions, and a death.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <thread>

#include "gossip/diloco.h"
#include "gossip/diloco_fragments.h"
#include "gossip/direct_mean_mixer.h"
#include "gossip/synchronous_average.h"
#include "models/cpu_backend.h"
#include "models/optimizer.h"
#include "dyadic_values.h"
#include "error/error.h"
#include "site_cluster.h"

using namespace meridian::gossip;
using meridian::gossip::testing::MixerKind;
using meridian::gossip::testing::SiteCluster;
using namespace std::chrono_literals;

namespace {

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// What every site ended with.
struct Run {
  std::vector<std::vector<float>> params, global, momentum;
  std::vector<std::uint64_t> outer_steps, reaverages, abandoned;
  std::size_t max_in_flight = 0;
  std::uint64_t untouched_steps = 0;  // after_step() calls that touches_parameters() said would not touch θ
  bool untouched_kept = true;         // and that left θ as it was
};

// One inner step of site r at step k on its parameters.
using InnerStep = std::function<void(std::size_t r, std::uint64_t k, std::span<float> params)>;

// Every site of `cluster` starts from `start[r]`, runs `steps` inner steps followed by after_step(k),
// then finish().
Run run_diloco(SiteCluster& cluster, const DilocoConfig& config, std::vector<std::vector<float>> start,
               std::uint64_t steps, const InnerStep& inner) {
  const std::size_t n = cluster.size();
  Run run;
  run.params = std::move(start);
  run.global.resize(n);
  run.momentum.resize(n);
  run.outer_steps.resize(n);
  run.reaverages.resize(n);
  run.abandoned.resize(n);
  std::vector<std::size_t> in_flight(n);
  std::vector<std::uint64_t> untouched(n);
  std::vector<char> kept(n, 1);
  cluster.run([&](std::size_t r, MixChannel& channel) {
    Diloco diloco(config, channel, run.params[r]);
    std::vector<float> before;
    for (std::uint64_t k = 0; k < steps; ++k) {
      inner(r, k, run.params[r]);
      const bool touches = diloco.touches_parameters(k);
      if (!touches) before = run.params[r];
      diloco.after_step(k);
      if (!touches) {
        ++untouched[r];
        if (!same_bits(before, run.params[r])) kept[r] = 0;
      }
      in_flight[r] = std::max(in_flight[r], diloco.in_flight());
    }
    diloco.finish();
    run.global[r].assign(diloco.global_parameters().begin(), diloco.global_parameters().end());
    run.momentum[r].assign(diloco.outer_momentum().begin(), diloco.outer_momentum().end());
    run.outer_steps[r] = diloco.outer_steps();
    run.reaverages[r] = diloco.reaverages();
    run.abandoned[r] = diloco.abandoned_rounds();
  });
  run.max_in_flight = *std::max_element(in_flight.begin(), in_flight.end());
  for (std::size_t r = 0; r < n; ++r) {
    run.untouched_steps += untouched[r];
    run.untouched_kept = run.untouched_kept && kept[r];
  }
  return run;
}

// Plain SGD with a gradient that does not depend on the parameters: different on every site and step.
void fixed_gradient_step(std::size_t r, std::uint64_t k, std::span<float> params) {
  for (std::size_t i = 0; i < params.size(); ++i)
    params[i] -= 0.05f * static_cast<float>(std::sin(0.7 * k + 1.3 * r + 0.37 * i) + 0.1 * r);
}

}  // namespace

TEST_CASE("diloco fragments: contiguous, one sync per step at staggered offsets, by absolute step",
          "[gossip][diloco][unit]") {
  const DilocoFragments one(10, 4, 1);
  for (std::uint64_t k = 0; k < 12; ++k)
    CHECK(one.synced_after(k) == ((k + 1) % 4 == 0 ? std::optional<std::uint32_t>(0) : std::nullopt));
  CHECK(one.begin(0) == 0);
  CHECK(one.end(0) == 10);

  const DilocoFragments three(10, 7, 3);  // offsets 0, 2, 4 of H = 7
  CHECK(three.offset(0) == 0);
  CHECK(three.offset(1) == 2);
  CHECK(three.offset(2) == 4);
  std::vector<std::uint64_t> synced(3);
  for (std::uint64_t k = 0; k < 70; ++k) {
    if (const auto f = three.synced_after(k)) {
      CHECK((k + 1) % 7 == three.offset(*f));
      ++synced[*f];
    }
  }
  CHECK(synced == std::vector<std::uint64_t>{10, 10, 10});  // every fragment once every H steps
  CHECK(three.synced_after(1) == std::optional<std::uint32_t>(1));
  // The fragments tile the buffer.
  CHECK(three.begin(0) == 0);
  CHECK(three.end(0) == three.begin(1));
  CHECK(three.end(1) == three.begin(2));
  CHECK(three.end(2) == 10);
  // F = H: a fragment after every step.
  const DilocoFragments every(8, 4, 4);
  for (std::uint64_t k = 0; k < 8; ++k) CHECK(every.synced_after(k).has_value());
}

TEST_CASE("diloco's outer mean is exact: every site takes the same outer step, the mean of the sites' Δ",
          "[gossip][diloco][cluster]") {
  // Dyadic start values and updates: every float sum and mean on the way is exact, so the result can be
  // compared bit for bit with the mean of the local parameters. η = 1, μ = 0: θ_g becomes that mean.
  const std::size_t sites = 4, dim = 9;
  for (MixerKind exchange : {MixerKind::kAverage, MixerKind::kDirectMean}) {
    SiteCluster cluster(sites, exchange);
    DilocoConfig config;
    config.inner_steps = 3;
    config.outer_lr = 1.0;
    config.outer_momentum = 0.0;
    const auto start = std::vector<std::vector<float>>(sites, testing::dyadic_start(1, dim, 7)[0]);
    const auto moves = testing::dyadic_start(sites, dim, 11);  // site r adds moves[r] / 16 per step
    auto run = run_diloco(cluster, config, start, 3, [&](std::size_t r, std::uint64_t, std::span<float> p) {
      for (std::size_t i = 0; i < dim; ++i) p[i] += moves[r][i] / 16.0f;
    });
    std::vector<float> expected(dim);
    for (std::size_t i = 0; i < dim; ++i) {
      double sum = 0;
      for (std::size_t r = 0; r < sites; ++r) sum += start[r][i] + 3.0 * moves[r][i] / 16.0;
      expected[i] = static_cast<float>(sum / sites);
    }
    INFO((exchange == MixerKind::kAverage ? "ring" : "direct exchange"));
    for (std::size_t r = 0; r < sites; ++r) {
      CHECK(run.outer_steps[r] == 1);
      CHECK(same_bits(run.global[r], expected));
      CHECK(same_bits(run.params[r], expected));  // τ = 0: θ ← θ_g
    }
  }
  // Any values, Nesterov momentum: still the same bits on every site (the mean's same-bits contract),
  // and within float rounding of the rule computed in double.
  const std::size_t sites3 = 3, dim3 = 5;
  SiteCluster cluster(sites3, MixerKind::kAverage);
  DilocoConfig config;
  config.inner_steps = 2;
  const std::vector<std::vector<float>> start(sites3, std::vector<float>(dim3, 0.5f));
  auto run = run_diloco(cluster, config, start, 6, fixed_gradient_step);
  std::vector<double> g(dim3, 0.5), m(dim3, 0.0);
  for (std::uint64_t sync = 0; sync < 3; ++sync) {
    for (std::size_t i = 0; i < dim3; ++i) {
      double delta = 0;
      for (std::size_t r = 0; r < sites3; ++r) {
        double x = g[i];
        for (std::uint64_t k = 2 * sync; k < 2 * sync + 2; ++k)
          x -= 0.05 * (std::sin(0.7 * k + 1.3 * r + 0.37 * i) + 0.1 * r);
        delta += (g[i] - x) / sites3;
      }
      m[i] = 0.9 * m[i] + delta;
      g[i] -= 0.7 * (delta + 0.9 * m[i]);
    }
  }
  for (std::size_t r = 0; r < sites3; ++r) {
    CHECK(same_bits(run.global[r], run.global[0]));
    CHECK(same_bits(run.momentum[r], run.momentum[0]));
    for (std::size_t i = 0; i < dim3; ++i) {
      CHECK(run.global[r][i] == Approx(g[i]).margin(1e-6));
      CHECK(run.momentum[r][i] == Approx(m[i]).margin(1e-6));
    }
  }
}

TEST_CASE("diloco with H = 1, outer lr 1 and no momentum is allreduce of parameters, with AdamW inside",
          "[gossip][diloco][cluster]") {
  // Each site descends its own quadratic ½·Σ c_r,i (θ_i − t_r,i)² with AdamW; the reference averages
  // the parameters exactly after every step.
  const std::size_t sites = 3, dim = 7;
  const std::uint64_t steps = 25;
  auto target = [](std::size_t r, std::size_t i) { return static_cast<float>(std::cos(1.7 * r + 0.9 * i)); };
  auto curvature = [](std::size_t r, std::size_t i) { return 0.5f + 0.25f * static_cast<float>((r + i) % 3); };
  auto make_optimizers = [&] {
    std::vector<std::unique_ptr<meridian::models::Optimizer>> opts;
    meridian::models::OptimizerConfig oc;
    oc.kind = meridian::models::OptimizerKind::adamw;
    oc.weight_decay = 0.01f;
    meridian::models::ScheduleConfig schedule;
    schedule.base_lr = 0.05f;
    for (std::size_t r = 0; r < sites; ++r)
      opts.push_back(std::make_unique<meridian::models::Optimizer>(oc, schedule, dim,
                                                                   std::make_shared<meridian::models::CpuBackend>()));
    return opts;
  };
  auto adamw_step = [&](std::vector<std::unique_ptr<meridian::models::Optimizer>>& opts) {
    return [&](std::size_t r, std::uint64_t, std::span<float> p) {
      std::vector<float> grad(dim);
      for (std::size_t i = 0; i < dim; ++i) grad[i] = curvature(r, i) * (p[i] - target(r, i));
      opts[r]->step(p, grad);
    };
  };
  const std::vector<std::vector<float>> start(sites, std::vector<float>(dim, 0.25f));

  auto reference_opts = make_optimizers();
  std::vector<std::vector<float>> reference = start;
  {
    SiteCluster cluster(sites, MixerKind::kAverage);
    auto step = adamw_step(reference_opts);
    cluster.run([&](std::size_t r, MixChannel& channel) {
      for (std::uint64_t k = 0; k < steps; ++k) {
        step(r, k, reference[r]);
        average_now(channel, k, reference[r], 60s);
      }
    });
  }
  auto opts = make_optimizers();
  SiteCluster cluster(sites, MixerKind::kAverage);
  DilocoConfig config;
  config.inner_steps = 1;
  config.outer_lr = 1.0;
  config.outer_momentum = 0.0;
  auto run = run_diloco(cluster, config, start, steps, adamw_step(opts));
  for (std::size_t r = 0; r < sites; ++r) {
    CHECK(run.outer_steps[r] == steps);
    for (std::size_t i = 0; i < dim; ++i) {
      INFO("site " << r << ", parameter " << i);
      CHECK(run.params[r][i] == Approx(reference[r][i]).margin(1e-5));
    }
  }
  // The averaged parameters moved: the comparison is not between two unchanged starts.
  CHECK(std::abs(reference[0][0] - 0.25f) > 0.1f);
}

TEST_CASE("diloco's outer step moves with the local update, not against it", "[gossip][diloco][cluster]") {
  // Site 0 moves every parameter by +d during the H inner steps, site 1 stays. Δ = θ_g − θ is −d and 0,
  // Δ̄ = −d/2, m = −d/2, θ_g ← θ_g − η(Δ̄ + μm) = θ_g + η(1 + μ)·d/2: forward, amplified by the momentum.
  // At the next sync nobody moved: m = −μd/2, θ_g ← θ_g + ημ²·d/2, still forward.
  const float d = 0.5f, start = 1.0f;
  for (std::uint64_t syncs : {1u, 2u}) {
    SiteCluster cluster(2, MixerKind::kAverage);
    DilocoConfig config;
    config.inner_steps = 2;  // η = 0.7, μ = 0.9: the defaults
    auto run = run_diloco(cluster, config, {{start}, {start}}, 2 * syncs,
                          [&](std::size_t r, std::uint64_t k, std::span<float> p) {
                            if (r == 0 && k == 0) p[0] += d;
                          });
    const double first = 0.7 * 1.9 * d / 2, second = 0.7 * 0.81 * d / 2;
    const double expected = start + first + (syncs == 2 ? second : 0.0);
    for (std::size_t r = 0; r < 2; ++r) {
      INFO("after " << syncs << " syncs, site " << r);
      CHECK(run.params[r][0] == Approx(expected).epsilon(1e-6));
      CHECK(run.momentum[r][0] == Approx(syncs == 1 ? -d / 2 : -0.9 * d / 2).epsilon(1e-6));
    }
  }
}

TEST_CASE(
    "diloco with overlap and compensation ends where it ends without, when gradients do not depend on the parameters",
    "[gossip][diloco][cluster]") {
  const std::size_t sites = 3, dim = 6;
  const std::uint64_t steps = 24;
  const std::vector<std::vector<float>> start(sites, std::vector<float>(dim, 1.0f));
  for (std::uint32_t fragments : {1u, 2u}) {
    DilocoConfig config;
    config.inner_steps = 4;
    config.fragments = fragments;
    Run plain;
    {
      SiteCluster cluster(sites, MixerKind::kAverage);
      plain = run_diloco(cluster, config, start, steps, fixed_gradient_step);
    }
    CHECK(plain.max_in_flight == 0);  // τ = 0 applies every exchange within its step
    for (std::uint32_t tau : {1u, 2u, 4u}) {
      config.overlap = tau;
      SiteCluster cluster(sites, MixerKind::kAverage);
      auto run = run_diloco(cluster, config, start, steps, fixed_gradient_step);
      INFO("F = " << fragments << ", τ = " << tau);
      // Exchanges stayed outstanding while the trainer went on.
      CHECK(run.max_in_flight >= 1);
      // Steps that neither start nor apply an exchange leave θ alone, and say so beforehand.
      CHECK(run.untouched_steps > 0);
      CHECK(run.untouched_kept);
      for (std::size_t r = 0; r < sites; ++r) {
        CHECK(run.outer_steps[r] == plain.outer_steps[r]);
        for (std::size_t i = 0; i < dim; ++i) {
          CHECK(run.params[r][i] == Approx(plain.params[r][i]).margin(2e-6));
          CHECK(run.global[r][i] == Approx(plain.global[r][i]).margin(2e-6));
          CHECK(run.momentum[r][i] == Approx(plain.momentum[r][i]).margin(2e-6));
        }
      }
    }
  }
}

TEST_CASE("diloco overlap keeps the exchange in flight for τ steps, and no longer", "[gossip][diloco][cluster]") {
  // With F = 2, H = 4 and τ = 3, a fragment's exchange is outstanding while the other fragment syncs:
  // two in flight at once, never three.
  SiteCluster cluster(2, MixerKind::kAverage);
  DilocoConfig config;
  config.inner_steps = 4;
  config.fragments = 2;
  config.overlap = 3;
  auto run =
      run_diloco(cluster, config, {std::vector<float>(4, 1.0f), std::vector<float>(4, 1.0f)}, 16, fixed_gradient_step);
  CHECK(run.max_in_flight == 2);
  CHECK(run.outer_steps[0] == 8);
}

TEST_CASE("diloco's fp16 and int8 pseudo-gradients: the outer mean within the codec's bound of the exact one",
          "[gossip][diloco][compression][cluster]") {
  // θ_g starts at 0 and site r's local parameters move to v_r, so Δ_r = −v_r exactly; with η = 1, μ = 0
  // and no re-average, m is the outer mean Δ̄ itself, as the wire carried it.
  const std::size_t sites = 4, dim = 700;  // two full int8 blocks and a short one
  for (Encoding encoding : {Encoding::kFp16, Encoding::kInt8}) {
    const CompressionSpec spec{encoding, 0.01};
    SiteCluster cluster(sites, MixerKind::kDirectMean, {}, 1, {}, {}, 100.0, spec);
    DilocoConfig config;
    config.inner_steps = 1;
    config.outer_lr = 1.0;
    config.outer_momentum = 0.0;
    config.wire = spec;
    config.reaverage_after_view_change = false;
    std::vector<std::vector<float>> v(sites, std::vector<float>(dim));
    std::mt19937 rng(5);
    for (std::size_t r = 0; r < sites; ++r)
      for (std::size_t i = 0; i < dim; ++i)  // magnitudes that differ by block, and tiny ones
        v[r][i] = std::normal_distribution<float>(0.0f, i < 256 ? 1e-3f : (i < 512 ? 3.0f : 1e-6f))(rng);
    auto run = run_diloco(
        cluster, config, std::vector<std::vector<float>>(sites, std::vector<float>(dim, 0.0f)), 1,
        [&](std::size_t r, std::uint64_t, std::span<float> p) { std::copy(v[r].begin(), v[r].end(), p.begin()); });
    double worst_error = 0;
    for (std::size_t i = 0; i < dim; ++i) {
      double exact = 0, bound = 0, magnitude = 0;
      const std::size_t block = i / kInt8Block * kInt8Block;
      for (std::size_t r = 0; r < sites; ++r) {
        exact -= static_cast<double>(v[r][i]) / sites;
        magnitude += std::abs(v[r][i]) / sites;
        if (encoding == Encoding::kFp16) {
          bound += (std::ldexp(std::abs(v[r][i]), -11) + std::ldexp(1.0, -25)) / sites;
        } else {
          float block_max = 0;
          for (std::size_t j = block; j < std::min(dim, block + kInt8Block); ++j)
            block_max = std::max(block_max, std::abs(v[r][j]));
          bound += block_max / 126.0 / sites;
        }
      }
      // The float32 sum of four contributions adds a few ulps of their magnitude.
      bound += 4 * std::ldexp(magnitude, -24);
      const double error = std::abs(run.momentum[0][i] - exact);
      INFO(to_string(spec) << ", element " << i);
      CHECK(error <= bound);
      worst_error = std::max(worst_error, error);
    }
    CHECK(worst_error > 0);  // the wire did round
    for (std::size_t r = 0; r < sites; ++r) {
      CHECK(same_bits(run.momentum[r], run.momentum[0]));
      // What diloco sent was already on the codec's grid: the mixer's own error feedback kept nothing.
      const auto* mixer = dynamic_cast<DirectMeanMixer*>(cluster.site(r).algorithm.get());
      REQUIRE(mixer != nullptr);
      CHECK(std::all_of(mixer->residual().begin(), mixer->residual().end(), [](float x) { return x == 0.0f; }));
    }
  }
}

TEST_CASE("compressed diloco re-averages once for the first view, not after every exchange",
          "[gossip][diloco][compression][cluster]") {
  // The direct exchange reports the view announced for the step like the ring does; when it reported
  // none, every compressed exchange looked like a view change and was followed by a ring re-average of
  // (θ_g, m), twice the model's size on the wire each time.
  const std::size_t sites = 3, dim = 300;
  for (Encoding encoding : {Encoding::kFp16, Encoding::kInt8}) {
    const CompressionSpec spec{encoding, 0.01};
    SiteCluster cluster(sites, MixerKind::kDirectMean, {}, 1, {}, {}, 100.0, spec);
    // A view with an id other than 0, as membership announces them: a mixer that reports no view (0)
    // then differs from the ring's report of the re-average.
    cluster.network().announce(meridian::peer::View::of(cluster.names(), 1, 0));
    DilocoConfig config;
    config.inner_steps = 2;
    config.wire = spec;
    auto run = run_diloco(cluster, config, std::vector<std::vector<float>>(sites, std::vector<float>(dim, 0.5f)), 12,
                          fixed_gradient_step);
    for (std::size_t r = 0; r < sites; ++r) {
      INFO(to_string(spec) << ", site " << r);
      CHECK(run.outer_steps[r] == 6);
      CHECK(run.reaverages[r] == 1);
    }
  }
}

TEST_CASE("diloco's wire error feedback: what rounding cut goes out with the fragment's next sync",
          "[gossip][diloco][compression][cluster]") {
  // Every sync the site moves θ by the same v from θ_g. Over R syncs the outer means add up to R·Δ within
  // one sync's rounding (the residual left at the end: at most s/2 of the last scale, which the residual
  // on top of v can double to max|v|/63), not R of them. One site, so the mean is its own wire value.
  const std::size_t dim = 300;
  const std::uint64_t syncs = 16;
  std::vector<float> v(dim);
  std::mt19937 rng(9);
  for (auto& x : v) x = std::normal_distribution<float>(0.0f, 1.0f)(rng);
  SiteCluster cluster(1, MixerKind::kDirectMean, {}, 1, {}, {}, 100.0, CompressionSpec{Encoding::kInt8, 0.01});
  DilocoConfig config;
  config.inner_steps = 1;
  config.outer_lr = 1.0;
  config.outer_momentum = 0.0;
  config.wire = CompressionSpec{Encoding::kInt8, 0.01};
  config.reaverage_after_view_change = false;
  std::vector<double> sent(dim, 0.0);
  cluster.run([&](std::size_t, MixChannel& channel) {
    std::vector<float> params(dim, 0.0f);
    Diloco diloco(config, channel, params);
    for (std::uint64_t k = 0; k < syncs; ++k) {
      // θ = θ_g + v exactly: set Δ = −v by writing θ_g = 0 first (the rule only reads θ_g and θ).
      std::fill(diloco.global_parameters().begin(), diloco.global_parameters().end(), 0.0f);
      std::copy(v.begin(), v.end(), params.begin());
      diloco.after_step(k);
      for (std::size_t i = 0; i < dim; ++i) sent[i] += diloco.outer_momentum()[i];  // m = Δ̄ with μ = 0
    }
  });
  float block_max = 0;
  for (std::size_t i = 0; i < 256; ++i) block_max = std::max(block_max, std::abs(v[i]));
  for (std::size_t i = 0; i < 256; ++i) {
    INFO("element " << i);
    CHECK(std::abs(sent[i] + syncs * static_cast<double>(v[i])) <= block_max / 63.0 + 1e-5);
  }
}

TEST_CASE("diloco restarted with its saved residuals sends what it would have sent without the restart",
          "[gossip][diloco][compression][checkpoint][cluster]") {
  // One site on an int8 wire, two fragments, no overlap: after `cut` steps the run stops and a new Diloco
  // takes over θ, θ_g, m and the residuals, as a resume from a checkpoint does. Its θ_g must end with the
  // same bits as the uninterrupted run's; without the residuals it must not (what rounding held back
  // would be lost).
  const std::size_t dim = 600;
  const std::uint64_t steps = 24, cut = 11;
  const CompressionSpec spec{Encoding::kInt8, 0.01};
  DilocoConfig config;
  config.inner_steps = 4;
  config.fragments = 2;
  config.wire = spec;
  config.reaverage_after_view_change = false;
  enum class Restart { kNone, kWithResiduals, kWithoutResiduals };
  struct Outcome {
    std::vector<float> global;
    bool residuals_held = false;  // something was held back at the restart
  };
  auto run = [&](Restart restart) {
    SiteCluster cluster(1, MixerKind::kDirectMean, {}, 1, {}, {}, 100.0, spec);
    Outcome out;
    cluster.run([&](std::size_t, MixChannel& channel) {
      std::vector<float> params(dim, 0.25f);
      auto diloco = std::make_unique<Diloco>(config, channel, params);
      for (std::uint64_t k = 0; k < steps; ++k) {
        if (k == cut && restart != Restart::kNone) {
          const std::vector<float> g(diloco->global_parameters().begin(), diloco->global_parameters().end());
          const std::vector<float> m(diloco->outer_momentum().begin(), diloco->outer_momentum().end());
          std::vector<float> residuals(dim);
          diloco->read_residuals(residuals);
          out.residuals_held = std::any_of(residuals.begin(), residuals.end(), [](float x) { return x != 0.0f; });
          diloco = std::make_unique<Diloco>(config, channel, params);
          std::copy(g.begin(), g.end(), diloco->global_parameters().begin());
          std::copy(m.begin(), m.end(), diloco->outer_momentum().begin());
          if (restart == Restart::kWithResiduals) diloco->write_residuals(residuals);
        }
        fixed_gradient_step(0, k, params);
        diloco->after_step(k);
      }
      diloco->finish();
      out.global.assign(diloco->global_parameters().begin(), diloco->global_parameters().end());
    });
    return out;
  };
  const auto uninterrupted = run(Restart::kNone);
  const auto restored = run(Restart::kWithResiduals);
  CHECK(restored.residuals_held);
  CHECK(same_bits(restored.global, uninterrupted.global));
  CHECK_FALSE(same_bits(run(Restart::kWithoutResiduals).global, uninterrupted.global));
}

TEST_CASE("diloco's residuals for a checkpoint leave out the exchange in flight, like θ_g and m",
          "[gossip][diloco][compression][checkpoint][cluster]") {
  // H = 2, τ = 1, one fragment: the sync after step 1 is compressed at once but applied after step 2.
  // While it is in flight the residuals read back as before it was compressed; once it is applied they
  // are the new ones.
  const std::size_t dim = 300;
  const CompressionSpec spec{Encoding::kFp16, 0.01};
  DilocoConfig config;
  config.inner_steps = 2;
  config.overlap = 1;
  config.wire = spec;
  config.reaverage_after_view_change = false;
  SiteCluster cluster(1, MixerKind::kDirectMean, {}, 1, {}, {}, 100.0, spec);
  std::vector<std::vector<float>> read;  // the residuals after steps 1 (in flight), 2, 3 (in flight), finish
  std::vector<std::size_t> in_flight;
  bool write_refused_in_flight = false, short_read_refused = false;
  cluster.run([&](std::size_t, MixChannel& channel) {
    std::vector<float> params(dim, 0.5f);
    Diloco diloco(config, channel, params);
    auto note = [&] {
      read.emplace_back(dim);
      diloco.read_residuals(read.back());
      in_flight.push_back(diloco.in_flight());
    };
    for (std::uint64_t k = 0; k < 4; ++k) {
      fixed_gradient_step(0, k, params);
      diloco.after_step(k);
      if (k >= 1) note();
    }
    // Written back only before the first step: the exchange in flight would be applied on top of them.
    try {
      diloco.write_residuals(read.back());
    } catch (const meridian::error::InternalError&) {
      write_refused_in_flight = true;
    }
    diloco.finish();
    note();
    std::vector<float> short_buffer(dim - 1);
    try {
      diloco.read_residuals(short_buffer);
    } catch (const meridian::error::InternalError&) {
      short_read_refused = true;
    }
  });
  REQUIRE(read.size() == 4);
  CHECK(in_flight == std::vector<std::size_t>{1, 0, 1, 0});
  const std::vector<float> zeros(dim, 0.0f);
  CHECK(same_bits(read[0], zeros));        // the first sync in flight: nothing was held back before it
  CHECK_FALSE(same_bits(read[1], zeros));  // applied: fp16 rounded the pseudo-gradient
  CHECK(same_bits(read[2], read[1]));      // the second sync in flight: the residual from before it
  CHECK_FALSE(same_bits(read[3], read[1]));
  CHECK(write_refused_in_flight);
  CHECK(short_read_refused);
}

TEST_CASE("diloco on a dense wire holds no residuals to save", "[gossip][diloco][checkpoint][cluster]") {
  SiteCluster cluster(1, MixerKind::kDirectMean);
  bool holds = true, refused = false;
  cluster.run([&](std::size_t, MixChannel& channel) {
    std::vector<float> params(10, 0.5f);
    Diloco diloco(DilocoConfig{}, channel, params);
    holds = diloco.holds_residuals();
    std::vector<float> r(params.size());
    try {
      diloco.read_residuals(r);
    } catch (const meridian::error::InternalError&) {
      refused = true;
    }
  });
  CHECK_FALSE(holds);
  CHECK(refused);
}

TEST_CASE("a dead diloco site does not stop the others: redone in the next view, then (θ_g, m) re-averaged",
          "[gossip][diloco][faults][cluster]") {
  RoundTimeouts timeouts;
  timeouts.round = 100ms;
  const std::size_t n = 4, dead = 3, dim = 5;
  SiteCluster cluster(n, MixerKind::kAverage, timeouts);
  // Plays the membership layer: once every survivor has abandoned a round, announces their view,
  // effective from step 18 (ahead, as membership does: the stuck round is redone in it anyway).
  std::thread announcer([&] {
    for (int i = 0; i < 60000; ++i) {
      bool all = true;
      for (std::size_t r = 0; r < dead; ++r) all = all && cluster.site(r).averager->abandoned() >= 1;
      if (all) break;
      std::this_thread::sleep_for(1ms);
    }
    cluster.network().announce(
        meridian::peer::View::of({cluster.names()[0], cluster.names()[1], cluster.names()[2]}, 1, 18));
  });
  DilocoConfig config;
  config.inner_steps = 2;
  config.overlap = 1;
  std::vector<std::vector<float>> params(n, std::vector<float>(dim, 1.0f)), global(n), momentum(n);
  std::vector<std::uint64_t> reaverages(n), abandoned(n), outer(n);
  cluster.run([&](std::size_t r, MixChannel& channel) {
    Diloco diloco(config, channel, params[r]);
    for (std::uint64_t k = 0; k < 40; ++k) {
      if (r == dead && k == 10) {
        diloco.finish();  // its last exchange completes; it dies between syncs
        cluster.network().kill(cluster.names()[r]);
        return;
      }
      fixed_gradient_step(r, k, params[r]);
      diloco.after_step(k);
    }
    diloco.finish();
    global[r].assign(diloco.global_parameters().begin(), diloco.global_parameters().end());
    momentum[r].assign(diloco.outer_momentum().begin(), diloco.outer_momentum().end());
    reaverages[r] = diloco.reaverages();
    abandoned[r] = diloco.abandoned_rounds();
    outer[r] = diloco.outer_steps();
  });
  announcer.join();
  for (std::size_t r = 0; r < dead; ++r) {
    CHECK(abandoned[r] == 1);
    CHECK(reaverages[r] == 2);  // the first view, then the view change
    CHECK(outer[r] == 20);      // every sync of the run, the stuck one redone
    CHECK(same_bits(global[r], global[0]));
    CHECK(same_bits(momentum[r], momentum[0]));
  }
}

TEST_CASE("diloco sites that start with different θ_g and outer momentum agree after the first view's re-average",
          "[gossip][diloco][cluster]") {
  // As a site resumed from an older checkpoint does: its (θ_g, m) are pulled to the mean with the others'.
  const std::size_t sites = 3, dim = 4;
  SiteCluster cluster(sites, MixerKind::kAverage);
  DilocoConfig config;
  config.inner_steps = 2;
  std::vector<std::vector<float>> params(sites, std::vector<float>(dim, 1.0f)), global(sites), momentum(sites);
  cluster.run([&](std::size_t r, MixChannel& channel) {
    Diloco diloco(config, channel, params[r]);
    for (std::size_t i = 0; i < dim; ++i) {
      diloco.outer_momentum()[i] = 0.1f * static_cast<float>(r);
      diloco.global_parameters()[i] += 0.01f * static_cast<float>(r);
    }
    for (std::uint64_t k = 0; k < 6; ++k) {
      fixed_gradient_step(r, k, params[r]);
      diloco.after_step(k);
    }
    diloco.finish();
    global[r].assign(diloco.global_parameters().begin(), diloco.global_parameters().end());
    momentum[r].assign(diloco.outer_momentum().begin(), diloco.outer_momentum().end());
  });
  for (std::size_t r = 1; r < sites; ++r) {
    CHECK(same_bits(global[r], global[0]));
    CHECK(same_bits(momentum[r], momentum[0]));
    CHECK(same_bits(params[r], params[0]));  // τ = 0, and the run ends on a sync
  }
}

TEST_CASE("diloco refuses nonsense knobs and names its wire precisions", "[gossip][diloco][unit]") {
  MixChannel channel;
  std::vector<float> params(4, 0.0f);
  auto with = [&](auto change) {
    DilocoConfig config;
    config.inner_steps = 4;
    change(config);
    return [&channel, &params, config] { Diloco d(config, channel, params); };
  };
  CHECK_THROWS_AS(with([](DilocoConfig& c) { c.inner_steps = 0; })(), meridian::error::UserError);
  CHECK_THROWS_AS(with([](DilocoConfig& c) { c.fragments = 0; })(), meridian::error::UserError);
  CHECK_THROWS_AS(with([](DilocoConfig& c) { c.fragments = 5; })(), meridian::error::UserError);  // F > H
  CHECK_THROWS_AS(with([](DilocoConfig& c) {
                    c.inner_steps = 8;
                    c.fragments = 5;
                  })(),
                  meridian::error::UserError);  // F > n
  CHECK_THROWS_AS(with([](DilocoConfig& c) { c.overlap = 5; })(), meridian::error::UserError);
  CHECK_THROWS_AS(with([](DilocoConfig& c) { c.outer_momentum = 1.0; })(), meridian::error::UserError);
  CHECK_THROWS_AS(with([](DilocoConfig& c) { c.outer_lr = 0.0; })(), meridian::error::UserError);
  CHECK_THROWS_AS(with([](DilocoConfig& c) {
                    c.wire = CompressionSpec{Encoding::kTopK, 0.01};
                  })(),
                  meridian::error::UserError);
  CHECK_NOTHROW(with([](DilocoConfig& c) { c.overlap = 4; })());
  CHECK(diloco_wire_name(*parse_compression("none")) == "fp32");
  CHECK(diloco_wire_name(*parse_compression("fp16")) == "fp16");
  CHECK(diloco_wire_name(*parse_compression("int8")) == "int8");
}

TEST_CASE("diloco's re-average after a view change carries the normalization statistics; syncs leave them local",
          "[gossip][diloco][norm-state][cluster]") {
  // Statistics start apart (rank 0, 2, 4); the first view's re-average replaces them by their mean, 2.
  // After it each site moves its own by its rank, and the later syncs (pseudo-gradients only) keep that.
  const std::size_t sites = 3, dim = 4;
  SiteCluster cluster(sites, MixerKind::kAverage);
  DilocoConfig config;
  config.inner_steps = 2;
  std::vector<std::vector<float>> params(sites, std::vector<float>(dim, 1.0f)), stats(sites);
  std::vector<std::uint64_t> reaverages(sites);
  cluster.run([&](std::size_t r, MixChannel& channel) {
    stats[r] = {2.0f * static_cast<float>(r), 1.0f + static_cast<float>(r)};
    Diloco diloco(config, channel, params[r], stats[r]);
    for (std::uint64_t k = 0; k < 6; ++k) {
      fixed_gradient_step(r, k, params[r]);
      diloco.after_step(k);
      if (k == 2) stats[r][0] += static_cast<float>(r);
    }
    diloco.finish();
    reaverages[r] = diloco.reaverages();
  });
  for (std::size_t r = 0; r < sites; ++r) {
    CHECK(reaverages[r] == 1);
    CHECK(stats[r] == std::vector<float>{2.0f + static_cast<float>(r), 2.0f});
  }
}
