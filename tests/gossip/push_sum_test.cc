#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <random>
#include <set>
#include <thread>

#include "gossip/exponential_graph.h"
#include "gossip/push_sum.h"
#include "dyadic_values.h"
#include "error/error.h"
#include "site_cluster.h"

using namespace meridian::gossip;
using meridian::gossip::testing::dyadic_start;
using meridian::gossip::testing::MixerKind;
using meridian::gossip::testing::SiteCluster;
using namespace std::chrono_literals;

namespace {

// Per step and site: the numerator, weight and model after the step (filled by each site's thread).
struct Trace {
  std::vector<std::vector<std::vector<float>>> x, z;  // [step][site] (dim)
  std::vector<std::vector<double>> w;                 // [step][site]
  std::vector<std::vector<float>> final_x, final_z;   // [site] after finish()
  std::vector<double> final_w;
  Trace(std::size_t steps, std::size_t sites)
      : x(steps, std::vector<std::vector<float>>(sites)),
        z(x),
        w(steps, std::vector<double>(sites)),
        final_x(sites),
        final_z(sites),
        final_w(sites) {}
};

Trace run_push_sum(SiteCluster& cluster, const std::vector<std::vector<float>>& start, std::uint64_t steps,
                   DelayedMixingConfig config) {
  Trace trace(steps, cluster.size());
  cluster.run([&](std::size_t r, MixChannel& channel) {
    std::vector<float> model = start[r];
    std::vector<float> no_update(model.size(), 0.0f);
    PushSum sgp(config, channel, model);
    for (std::uint64_t k = 0; k < steps; ++k) {
      sgp.step(k, no_update);
      trace.x[k][r].assign(sgp.numerator().begin(), sgp.numerator().end());
      trace.w[k][r] = sgp.weight();
      trace.z[k][r] = model;
    }
    sgp.finish();
    trace.final_x[r].assign(sgp.numerator().begin(), sgp.numerator().end());
    trace.final_w[r] = sgp.weight();
    trace.final_z[r] = model;
  });
  return trace;
}

}  // namespace

TEST_CASE("exponential graph: distinct peers, in-degree equals out-degree, everyone reached in ⌈log2 n⌉ steps",
          "[gossip][sgp][unit]") {
  for (std::size_t n = 1; n <= 40; ++n) {
    for (std::size_t k = 1; k <= 3; ++k) {
      for (std::uint64_t step = 0; step < 12; ++step) {
        std::vector<std::size_t> in_degree(n, 0);
        for (std::size_t r = 0; r < n; ++r) {
          auto outs = exponential_out_peers(n, r, step, k);
          CHECK(std::set<std::size_t>(outs.begin(), outs.end()).size() == outs.size());
          CHECK(std::count(outs.begin(), outs.end(), r) == 0);
          for (auto o : outs) {
            ++in_degree[o];
            auto ins = exponential_in_peers(n, o, step, k);
            CHECK(std::count(ins.begin(), ins.end(), r) == 1);
          }
        }
        for (auto d : in_degree) CHECK(d == std::min(k, exponential_graph_period(n)));
      }
    }
    // Reachability with K = 1 from step 0: after ⌈log2 n⌉ steps every rank has heard from every rank.
    std::vector<std::vector<bool>> knows(n, std::vector<bool>(n, false));
    for (std::size_t r = 0; r < n; ++r) knows[r][r] = true;
    const std::size_t rounds = n <= 1 ? 0 : static_cast<std::size_t>(std::bit_width(n - 1));
    for (std::uint64_t step = 0; step < rounds; ++step) {
      auto next = knows;
      for (std::size_t r = 0; r < n; ++r)
        for (auto o : exponential_out_peers(n, r, step, 1))
          for (std::size_t i = 0; i < n; ++i) next[o][i] = next[o][i] || knows[r][i];
      knows = next;
    }
    for (auto& row : knows) CHECK(std::all_of(row.begin(), row.end(), [](bool b) { return b; }));
  }
}

// Exactness: with K + 1 a power of two, a share is x·2^−e, exact in float, and kept + sent = x bit
// for bit. Receiving adds shares; those sums are exact while every value fits the 24-bit significand.
// Starting from multiples of 1/16 below 8 (7 bits), each K = 1 step adds at most one bit, so 16 steps
// are exact for any n. For n a power of two, one cycle of K = 1 steps (offsets 1, 2, ..., n/2) is an
// exact butterfly: every site then holds the mean, which stays put, so sums stay exact for ever.
// Weights live in double and are shares of 1 with the same argument. Sums of at most 32 such floats
// are exact in double, so Σ compared with == is an exact comparison.
TEST_CASE("push-sum conserves Σx and Σw exactly", "[gossip][sgp][cluster]") {
  auto check_mass = [](const Trace& t, const std::vector<std::vector<float>>& start, std::uint64_t steps) {
    const std::size_t n = start.size(), dim = start[0].size();
    for (std::size_t i = 0; i < dim; ++i) {
      double want = 0;
      for (auto& s : start) want += s[i];
      for (std::uint64_t k = 0; k < steps; ++k) {
        double got = 0;
        for (std::size_t j = 0; j < n; ++j) got += t.x[k][j][i];
        REQUIRE(got == want);
      }
    }
    for (std::uint64_t k = 0; k < steps; ++k) {
      double mass = 0;
      for (std::size_t j = 0; j < n; ++j) mass += t.w[k][j];
      REQUIRE(mass == static_cast<double>(n));
    }
  };
  SECTION("n a power of two, 400 steps") {
    for (std::size_t n : {2u, 4u, 8u, 16u}) {
      SiteCluster cluster(n, MixerKind::kPushSum);
      auto start = dyadic_start(n, 3, static_cast<unsigned>(n));
      INFO("n=" << n);
      check_mass(run_push_sum(cluster, start, 400, {}), start, 400);
    }
  }
  SECTION("any n, K = 1 and K = 3, within the exact horizon") {
    for (std::size_t n : {3u, 5u, 6u, 7u, 12u, 13u}) {
      for (std::size_t k : {1u, 3u}) {
        if (k == 3 && exponential_graph_period(n) < 3) continue;  // K would clamp to 2: shares of 1/3
        SiteCluster cluster(n, MixerKind::kPushSum, {}, k);
        auto start = dyadic_start(n, 3, static_cast<unsigned>(n + 100 * k));
        std::uint64_t steps = k == 1 ? 16 : 8;  // K = 3 adds two bits per step
        INFO("n=" << n << " K=" << k);
        check_mass(run_push_sum(cluster, start, steps, {}), start, steps);
      }
    }
  }
}

// In overlap mode a mix is folded in as x ← x + (m_s − x_s): more roundings than the exact horizon
// above allows, so mass is compared within float rounding once every mix has been applied.
TEST_CASE("overlapping push-sum (OSGP) keeps mass up to rounding and reaches consensus", "[gossip][sgp][cluster]") {
  const std::size_t n = 7, dim = 4;
  SiteCluster cluster(n, MixerKind::kPushSum);
  auto start = dyadic_start(n, dim, 9);
  DelayedMixingConfig config;
  config.delay = 2;  // τ: at most two steps ahead of the oldest expected mix
  config.overlap = true;
  auto t = run_push_sum(cluster, start, 300, config);
  double mass = 0;
  for (std::size_t j = 0; j < n; ++j) mass += t.final_w[j];
  CHECK(mass == Approx(static_cast<double>(n)).epsilon(1e-9));
  for (std::size_t i = 0; i < dim; ++i) {
    double want = 0, got = 0;
    for (std::size_t j = 0; j < n; ++j) {
      want += start[j][i];
      got += t.final_x[j][i];
    }
    CHECK(got == Approx(want).epsilon(1e-6));
    for (std::size_t j = 0; j < n; ++j) CHECK(t.final_z[j][i] == Approx(want / n).epsilon(1e-5));
  }
}

TEST_CASE("push-sum spread shrinks geometrically to 1e-6 within O(log n) cycles", "[gossip][sgp][cluster]") {
  for (std::size_t n = 2; n <= 32; ++n) {
    SiteCluster cluster(n, MixerKind::kPushSum);
    std::mt19937 rng(static_cast<unsigned>(n));
    std::uniform_real_distribution<float> dist(0.0f, 1.0f);
    std::vector<std::vector<float>> start(n, std::vector<float>(2));
    for (auto& s : start)
      for (auto& x : s) x = dist(rng);
    const std::size_t cycle = exponential_graph_period(n);
    const std::size_t log_n = static_cast<std::size_t>(std::bit_width(n - 1));  // ⌈log2 n⌉
    // Measured: 1 cycle for powers of two (an exact butterfly), at most 11 for n = 3..32.
    const std::size_t max_cycles = 6 * log_n;
    auto t = run_push_sum(cluster, start, cycle * max_cycles, {});
    auto spread = [&](const std::vector<std::vector<float>>& z) {
      double worst = 0;
      for (std::size_t i = 0; i < 2; ++i) {
        double mean = 0;
        for (std::size_t j = 0; j < n; ++j) mean += start[j][i];
        mean /= n;
        for (std::size_t j = 0; j < n; ++j) worst = std::max(worst, std::abs(z[j][i] - mean));
      }
      return worst;
    };
    const double s0 = spread(start);
    std::size_t reached = 0;
    double previous = s0;
    for (std::size_t c = 1; c <= max_cycles; ++c) {
      double s = spread(t.z[c * cycle - 1]);
      INFO("n=" << n << " cycle " << c << " spread " << s << " start " << s0);
      // Geometric: every cycle at least halves the spread until float rounding is reached.
      if (previous > 1e-6 * s0) CHECK(s <= 0.5 * previous);
      if (!reached && s <= 1e-6 * s0) reached = c;
      previous = s;
    }
    INFO("n=" << n << " log2 n=" << log_n);
    CHECK(reached != 0);
    CHECK(reached <= max_cycles);
  }
}

TEST_CASE("a dead push-sum peer does not stop the others, and they stop sending to it",
          "[gossip][sgp][faults][cluster]") {
  const std::size_t n = 6, dead = 2;
  // τ = 4: the survivors wait for the dead site's shares only 4 steps late, and give up on them the same way.
  const auto tau = GENERATE(as<std::uint64_t>{}, 0, 4);
  INFO("staleness bound " << tau);
  RoundTimeouts timeouts;
  timeouts.round = 50ms;
  SiteCluster cluster(n, MixerKind::kPushSum, timeouts, 1, {}, {}, 100.0, {}, tau);
  auto names = cluster.names();
  std::vector<std::string> survivors;
  for (std::size_t r = 0; r < n; ++r)
    if (r != dead) survivors.push_back(names[r]);
  // Plays membership: once a survivor has missed a share (the death is noticed), announce the view
  // without the dead site, in force from step 60 (views are announced ahead).
  std::uint64_t dropped_at_announce = 0;
  std::thread membership([&] {
    for (int i = 0; i < 60000; ++i) {
      std::uint64_t missed = 0;
      for (std::size_t r = 0; r < n; ++r)
        if (r != dead) missed += static_cast<PushSumMixer&>(*cluster.site(r).algorithm).missing();
      if (missed > 0) break;
      std::this_thread::sleep_for(1ms);
    }
    dropped_at_announce = cluster.network().dropped();
    cluster.network().announce(meridian::peer::View::of(survivors, 1, 60));
  });
  const std::uint64_t steps = 160;
  std::vector<std::vector<float>> final_z(n);
  std::vector<std::uint64_t> missing(n), done(n);
  cluster.run([&](std::size_t r, MixChannel& channel) {
    std::vector<float> model = {static_cast<float>(r), static_cast<float>(r * r)};
    std::vector<float> no_update(2, 0.0f);
    PushSum sgp({}, channel, model);
    for (std::uint64_t k = 0; k < steps; ++k) {
      if (r == dead && k == 20) {
        cluster.network().kill(names[r]);
        return;
      }
      sgp.step(k, no_update);
      done[r] = k + 1;
    }
    sgp.finish();
    final_z[r] = model;
    missing[r] = sgp.mixing().missing_shares();
  });
  membership.join();
  std::uint64_t total_missing = 0;
  for (std::size_t r = 0; r < n; ++r) {
    if (r == dead) continue;
    CHECK(done[r] == steps);
    total_missing += missing[r];
    // Still a weighted average of the starting values, and the survivors agree.
    CHECK(final_z[r][0] >= 0.0f);
    CHECK(final_z[r][0] <= static_cast<float>(n - 1));
    CHECK(final_z[r][0] == Approx(final_z[0][0]).epsilon(1e-5));
    CHECK(final_z[r][1] == Approx(final_z[0][1]).epsilon(1e-5));
  }
  CHECK(total_missing > 0);  // the dead site's shares were waited for, then given up on
  // Once membership announced the survivors' view, nobody sent to the dead site any more, although
  // the view takes effect only at step 60: at most the shares already on their way were dropped.
  CHECK(cluster.network().dropped() - dropped_at_announce <= n);
}

TEST_CASE("push-sum resumes from a checkpoint and refuses a bad one", "[gossip][sgp][unit]") {
  MixChannel channel;
  std::vector<float> model = {1.0f, 2.0f};
  PushSum sgp({}, channel, model);
  std::vector<float> saved = {3.0f, 6.0f};
  sgp.restore(saved, 1.5);
  CHECK(model == std::vector<float>{2.0f, 4.0f});
  CHECK(sgp.weight() == 1.5);
  CHECK_THROWS_AS(sgp.restore(std::vector<float>{1.0f}, 1.0), meridian::error::UserError);
  CHECK_THROWS_AS(sgp.restore(saved, 0.0), meridian::error::UserError);
  CHECK_THROWS_AS(sgp.restore(saved, std::nan("")), meridian::error::UserError);
}

TEST_CASE("push-sum's model is x / w rounded once to float, whatever w", "[gossip][sgp][unit]") {
  // Weights that are floats (dyadic ones, as on the exponential graph, and others) and weights that
  // are not: the model must hold the double quotient rounded to float in every case.
  std::mt19937 rng(17);
  std::uniform_real_distribution<float> value(-3.0f, 3.0f);
  std::vector<float> numerator(4096);
  for (float& v : numerator) v = value(rng);
  numerator[0] = 0.0f;
  numerator[1] = -0.0f;
  numerator[2] = 1e-38f;  // a quotient near the subnormal range
  MixChannel channel;
  std::vector<float> model(numerator.size());
  PushSum sgp({}, channel, model);
  for (double w : {1.0, 0.5, 1.5, 0.75, 3.0, 1.0 / 3.0, 0.1, 2.0 / 3.0, 1.0 + 1e-12}) {
    INFO("w=" << w);
    sgp.restore(numerator, w);
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < numerator.size(); ++i)
      wrong +=
          std::bit_cast<std::uint32_t>(model[i]) != std::bit_cast<std::uint32_t>(static_cast<float>(numerator[i] / w));
    CHECK(wrong == 0);
  }
}

TEST_CASE("a push-sum step given the model before and after, or changed in place, is the step given their difference",
          "[gossip][sgp][cluster]") {
  // Two clusters from the same start, one fed the update, the other the two models it comes from:
  // every numerator, weight and model must be the same bits. Synchronous mixing, with and without
  // delayed compensation, so that both runs mix the same shares (with overlap, which shares a mix
  // finds depends on timing).
  const std::size_t n = 4, dim = 257;
  const std::uint64_t steps = 24;
  for (std::uint32_t delay : {0u, 1u}) {
    INFO("delay=" << delay);
    DelayedMixingConfig config;
    config.delay = delay;
    auto start = dyadic_start(n, dim, 5);
    enum class Mode { kUpdate, kTwoModels, kInPlace };
    auto run = [&](Mode mode) {
      SiteCluster cluster(n, MixerKind::kPushSum);
      Trace trace(steps, n);
      cluster.run([&](std::size_t r, MixChannel& channel) {
        std::vector<float> model = start[r];
        PushSum sgp(config, channel, model);
        std::mt19937 rng(static_cast<unsigned>(100 + r));
        std::uniform_real_distribution<float> gradient(-0.1f, 0.1f);
        std::vector<float> before(dim), update(dim);
        for (std::uint64_t k = 0; k < steps; ++k) {
          before = model;
          for (float& v : model) v -= gradient(rng);  // the "optimizer step" on z
          if (mode == Mode::kInPlace) {
            sgp.step_in_place(k);
          } else if (mode == Mode::kTwoModels) {
            sgp.step(k, before, model);
          } else {
            for (std::size_t i = 0; i < dim; ++i) update[i] = before[i] - model[i];
            sgp.step(k, update);
          }
          trace.x[k][r].assign(sgp.numerator().begin(), sgp.numerator().end());
          trace.w[k][r] = sgp.weight();
          trace.z[k][r] = model;
        }
        sgp.finish();
      });
      return trace;
    };
    const Trace a = run(Mode::kUpdate), b = run(Mode::kTwoModels), c = run(Mode::kInPlace);
    for (std::uint64_t k = 0; k < steps; ++k) {
      for (std::size_t r = 0; r < n; ++r) {
        INFO("step " << k << " site " << r);
        REQUIRE(a.w[k][r] == b.w[k][r]);
        REQUIRE(a.x[k][r] == b.x[k][r]);
        REQUIRE(a.z[k][r] == b.z[k][r]);
        REQUIRE(a.w[k][r] == c.w[k][r]);
        REQUIRE(a.x[k][r] == c.x[k][r]);
        REQUIRE(a.z[k][r] == c.z[k][r]);
      }
    }
  }
  MixChannel channel;
  std::vector<float> model(3);
  PushSum sgp({}, channel, model);
  CHECK_THROWS_AS(sgp.step(0, std::vector<float>(3), std::vector<float>(2)), meridian::error::InternalError);
}

TEST_CASE("push-sum's fused pass gives the bits of the update, the mixing and the refresh run one after the other",
          "[gossip][sgp][delayed][cluster]") {
  // The reference runs DelayedMixing on its own over a numerator, with the push-sum update before it
  // and z = x / w after it, each a pass of its own; PushSum folds the three into one blocked pass.
  // Weights of 1, a float other than 1 and a double that is no float take each form of the quotient;
  // the model spans several blocks and a partial one. Synchronous mixing (D = 0 and 1), so that both
  // runs mix the same shares.
  const std::size_t n = 4, dim = 2600;
  const std::uint64_t steps = 12;
  const std::vector<double> start_weight = {1.0, 0.75, 1.0 / 3.0, 0.5};
  auto quotient = [](float v, double w) {
    const float wf = static_cast<float>(w);
    if (static_cast<double>(wf) != w) return static_cast<float>(v / w);
    return wf == 1.0f ? v : v / wf;
  };
  for (std::uint32_t delay : {0u, 1u}) {
    INFO("delay=" << delay);
    DelayedMixingConfig config;
    config.delay = delay;
    auto start = dyadic_start(n, dim, 11);
    auto run = [&](bool fused) {
      SiteCluster cluster(n, MixerKind::kPushSum);
      Trace trace(steps, n);
      cluster.run([&](std::size_t r, MixChannel& channel) {
        std::mt19937 rng(static_cast<unsigned>(200 + r));
        std::uniform_real_distribution<float> gradient(-0.1f, 0.1f);
        std::vector<float> x = start[r];
        double w = start_weight[r];
        std::vector<float> model(dim);
        for (std::size_t i = 0; i < dim; ++i) model[i] = quotient(x[i], w);
        if (fused) {
          PushSum sgp(config, channel, model);
          sgp.restore(x, w);
          for (std::uint64_t k = 0; k < steps; ++k) {
            for (float& v : model) v -= gradient(rng);
            sgp.step_in_place(k);
            trace.x[k][r].assign(sgp.numerator().begin(), sgp.numerator().end());
            trace.w[k][r] = sgp.weight();
            trace.z[k][r] = model;
          }
          sgp.finish();
        } else {
          DelayedMixing mixing(config, channel, x, {}, &w);
          std::vector<float> before(dim);
          for (std::uint64_t k = 0; k < steps; ++k) {
            before = model;
            for (float& v : model) v -= gradient(rng);
            const float f = static_cast<float>(w);
            for (std::size_t i = 0; i < dim; ++i) x[i] -= f * (before[i] - model[i]);
            mixing.after_step(k);
            for (std::size_t i = 0; i < dim; ++i) model[i] = quotient(x[i], w);
            trace.x[k][r] = x;
            trace.w[k][r] = w;
            trace.z[k][r] = model;
          }
          mixing.finish();
        }
      });
      return trace;
    };
    const Trace reference = run(false), fused = run(true);
    for (std::uint64_t k = 0; k < steps; ++k) {
      for (std::size_t r = 0; r < n; ++r) {
        INFO("step " << k << " site " << r);
        REQUIRE(fused.w[k][r] == reference.w[k][r]);
        REQUIRE(fused.x[k][r] == reference.x[k][r]);
        REQUIRE(fused.z[k][r] == reference.z[k][r]);
      }
    }
    // The weights took every form of the quotient while the mixes were folded in.
    CHECK(reference.w[steps - 1][2] != static_cast<double>(static_cast<float>(reference.w[steps - 1][2])));
  }
}

// Sites that end a run leave one by one, and a site still mixing its last step learns that an in-peer
// left before it takes that in-peer's share. The share was sent before the leave: it is added, so every
// site ends with the bits of a run in which nobody had left yet, whichever site finishes first.
TEST_CASE("a share an in-peer sent before it left is added: the last mix is the same whoever finishes first",
          "[gossip][sgp][faults][cluster]") {
  const std::size_t n = 4, leaver = 0;
  const std::uint64_t steps = 9;
  // At the last step the leaver's out-peer B waits for the leaver's share alone, and B's own out-peer
  // is not the leaver, so the leaver can finish while B is held back.
  const std::size_t b = exponential_out_peers(n, leaver, steps - 1, 1).at(0);
  REQUIRE(exponential_out_peers(n, b, steps - 1, 1).at(0) != leaver);
  const auto start = dyadic_start(n, 2, 7);

  const auto run = [&](bool leave) {
    SiteCluster cluster(n, MixerKind::kPushSum);
    const auto names = cluster.names();
    std::atomic<bool> left{false};
    std::vector<std::vector<float>> final_z(n);
    cluster.run([&](std::size_t r, MixChannel& channel) {
      std::vector<float> model = start[r];
      // A different update at every site, so that the sites never reach consensus and a mix that
      // misses a share shows in the bits.
      const std::vector<float> update{0.25f * static_cast<float>(r + 1), -0.5f * static_cast<float>(r)};
      PushSum sgp({}, channel, model);
      for (std::uint64_t k = 0; k < steps; ++k) {
        if (leave && r == b && k == steps - 1)
          for (int i = 0; i < 60000 && !left; ++i) std::this_thread::sleep_for(1ms);
        sgp.step(k, update);
      }
      sgp.finish();
      final_z[r] = model;
      if (leave && r == leaver) {
        std::vector<std::string> others;
        for (std::size_t s = 0; s < n; ++s)
          if (s != leaver) others.push_back(names[s]);
        cluster.network().announce(meridian::peer::View::of(others, 1, steps + 8));
        left = true;
      }
    });
    REQUIRE((!leave || left));
    return final_z;
  };
  const auto together = run(false);
  const auto one_left = run(true);
  for (std::size_t r = 0; r < n; ++r) {
    INFO("site " << r << " (the leaver's out-peer at the last step: " << b << ")");
    CHECK(one_left[r] == together[r]);
  }
}
