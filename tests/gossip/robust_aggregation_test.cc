// Optional robust aggregation (gossip/robust_options.h): its arithmetic, and 8 in-process sites training
// the synthetic logistic regression (tests/gossip/logistic_problem.h) while one of them sends scaled
// garbage. With the option on, the honest sites end within 2 accuracy points of a clean run (and near the
// optimum); with it off, the garbage wrecks them. Run with -s to see the figures docs/reliability.md records.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>

#include "error/error.h"
#include "gossip/delayed_mixing.h"
#include "gossip/push_sum.h"
#include "gossip/robust_combine.h"
#include "gossip/update_scale.h"
#include "gossip/synchronous_average.h"
#include "logistic_problem.h"
#include "site_cluster.h"

using namespace meridian::gossip;
using namespace meridian::gossip::testing;
using namespace std::chrono_literals;

TEST_CASE("trimmed mean drops the extremes (or only the outliers) of every coordinate, in any order, to the same bits",
          "[gossip][robust][unit]") {
  const std::vector<float> a{1, 10, -3}, b{2, 20, -2}, c{3, -1000, -1}, d{1000, 30, 5}, e{4, 40, 0};
  std::vector<float> out(3), again(3);
  trimmed_mean({a, b, c, d, e}, 1, out);
  CHECK(out == std::vector<float>{3, 20, -1});  // mean of the middle three of each column
  trimmed_mean({e, d, c, b, a}, 1, again);
  CHECK(again == out);
  trimmed_mean({a, b, c, d, e}, 0, out);
  CHECK(out[0] == Approx(202.0));
  // Dropping only outliers (beyond 4.5 median absolute deviations): column 0 loses just the 1000,
  // column 1 just the -1000; column 2 (-3, -2, -1, 5, 0: median -1, MAD 1) loses the 5 only.
  trimmed_mean({a, b, c, d, e}, 1, out, 4.5);
  CHECK(out == std::vector<float>{2.5f, 25.0f, -1.5f});
  trimmed_mean({e, c, a, d, b}, 1, again, 4.5);
  CHECK(again == out);
  CHECK_THROWS_AS(trimmed_mean({a, b}, 1, out), meridian::error::InternalError);
  CHECK_THROWS_AS(trimmed_mean({a, b, std::vector<float>{1}}, 1, out), meridian::error::InternalError);
}

TEST_CASE("norm clipping shortens long differences only, and zeroes non-finite ones", "[gossip][robust][unit]") {
  std::vector<float> v{3, 4};
  CHECK(clip_norm(v, 10.0) == 1.0);
  CHECK(v == std::vector<float>{3, 4});
  CHECK(clip_norm(v, 1.0) == Approx(0.2));
  CHECK(v[0] == Approx(0.6f));
  CHECK(v[1] == Approx(0.8f));
  std::vector<float> bad{1, std::numeric_limits<float>::infinity()};
  CHECK(clip_norm(bad, 1.0) == 0.0);
  CHECK(bad == std::vector<float>{0, 0});
}

namespace {

constexpr std::uint64_t kRobustSteps = 1000;
constexpr std::size_t kByzantine = 5;

struct Outcome {
  double worst_accuracy = 1;  // over the honest sites
  double worst_gap = 0;       // global loss minus the optimum, worst honest site (inf when not finite)
};

Outcome train(MixerKind kind, bool robust, bool attacked, const Problem& problem, double best) {
  RobustOptions options;
  options.enabled = robust;
  std::vector<std::size_t> byzantine;
  if (attacked) byzantine.push_back(kByzantine);
  std::vector<std::vector<float>> models(kSites, std::vector<float>(kDim, 0.0f));
  SiteCluster cluster(kSites, kind, {}, 1, options, byzantine, 100.0);
  cluster.run([&](std::size_t r, MixChannel& channel) {
    std::vector<float> g;
    if (kind == MixerKind::kAverage) {
      for (std::uint64_t k = 0; k < kRobustSteps; ++k) {
        site_gradient(problem, r, models[r], g);
        average_now(channel, k, g, 60s);
        for (std::size_t i = 0; i < kDim; ++i) models[r][i] -= static_cast<float>(lr_at(k) * g[i]);
      }
    } else if (kind == MixerKind::kPushSum) {
      PushSum sgp(DelayedMixingConfig{}, channel, models[r]);
      for (std::uint64_t k = 0; k < kRobustSteps; ++k) {
        site_gradient(problem, r, models[r], g);
        for (auto& v : g) v = static_cast<float>(lr_at(k) * v);
        sgp.step(k, g);
      }
      sgp.finish();
    } else {
      DelayedMixingConfig config;
      config.reaverage_every = 250;
      DelayedMixing dsync(config, channel, models[r]);
      for (std::uint64_t k = 0; k < kRobustSteps; ++k) {
        site_gradient(problem, r, models[r], g);
        for (std::size_t i = 0; i < kDim; ++i) models[r][i] -= static_cast<float>(lr_at(k) * g[i]);
        dsync.after_step(k);
      }
      dsync.finish();
    }
  });
  Outcome out;
  for (std::size_t r = 0; r < kSites; ++r) {
    if (attacked && r == kByzantine) continue;
    out.worst_accuracy = std::min(out.worst_accuracy, accuracy(problem, models[r]));
    const double gap = global_loss(problem, models[r]) - best;
    out.worst_gap = std::isfinite(gap) ? std::max(out.worst_gap, gap) : std::numeric_limits<double>::infinity();
  }
  return out;
}

}  // namespace

TEST_CASE(
    "with robust aggregation, one garbage-sending site of 8 costs under 2 accuracy points; without, training collapses",
    "[gossip][robust][cluster]") {
  const Problem problem = make_problem();
  const double best = optimal_loss(problem);
  const std::pair<MixerKind, const char*> algorithms[] = {
      {MixerKind::kAverage, "allreduce"}, {MixerKind::kPushSum, "sgp"}, {MixerKind::kGroup, "dsync"}};
  for (const auto& [kind, name] : algorithms) {
    const Outcome clean = train(kind, false, false, problem, best);
    const Outcome clean_robust = train(kind, true, false, problem, best);
    const Outcome defended = train(kind, true, true, problem, best);
    const Outcome undefended = train(kind, false, true, problem, best);
    INFO(name << ": worst honest accuracy / loss above the optimum after " << kRobustSteps << " steps:"
              << " clean " << clean.worst_accuracy << " / " << clean.worst_gap << "; clean, robust on "
              << clean_robust.worst_accuracy << " / " << clean_robust.worst_gap << "; one Byzantine, robust on "
              << defended.worst_accuracy << " / " << defended.worst_gap << "; one Byzantine, robust off "
              << undefended.worst_accuracy << " / " << undefended.worst_gap);
    CHECK(clean_robust.worst_accuracy >= clean.worst_accuracy - 0.02);
    CHECK(defended.worst_accuracy >= clean.worst_accuracy - 0.02);
    CHECK(defended.worst_gap < 0.05);
    CHECK((undefended.worst_accuracy < clean.worst_accuracy - 0.1 || undefended.worst_gap > 1.0));
  }
}

TEST_CASE("the own update scale starts unknown, then follows how far the own vector moved between mixes",
          "[gossip][robust][unit]") {
  UpdateScale scale;
  const std::vector<float> first{0, 0}, moved{3, 4}, again{3, 4};
  CHECK_FALSE(scale.on_input(0, first));  // no previous output yet
  scale.on_output(0, first);
  CHECK(*scale.on_input(0, moved) == Approx(5.0));  // the first measurement is the scale
  scale.on_output(0, moved);
  CHECK(*scale.on_input(0, again) == Approx(4.5));              // 0.9 · 5 + 0.1 · 0
  CHECK_FALSE(scale.on_input(1, moved));                        // tags are separate
  CHECK_FALSE(scale.on_input(0, std::vector<float>{1, 2, 3}));  // a different size starts afresh
}
