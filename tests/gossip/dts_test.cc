#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <condition_variable>
#include <mutex>

#include "gossip/dts.h"
#include "gossip/mix_server.h"
#include "gossip/synchronous_average.h"
#include "allreduce_reference.h"
#include "error/error.h"
#include "site_cluster.h"

using namespace meridian::gossip;
using meridian::gossip::testing::MixerKind;
using meridian::gossip::testing::SiteCluster;
using namespace std::chrono_literals;

namespace {

constexpr std::size_t kDim = 6;
constexpr std::uint64_t kSteps = 40;

// A fixed gradient stream that does not depend on the parameters: different on every site and step.
float gradient(std::uint64_t k, std::size_t site, std::size_t i) {
  return static_cast<float>(std::sin(0.7 * k + 1.3 * site + 0.37 * i) + 0.1 * site);
}
double learning_rate(std::uint64_t k) { return 0.1 / (1.0 + 0.05 * k); }  // a schedule, not a constant

// allreduce's parameters computed in double: u ← m·u + ḡ, w ← w − γ·u.
std::vector<double> allreduce_reference(std::size_t sites, double m) {
  return testing::allreduce_momentum_reference(sites, kDim, kSteps, m, learning_rate, gradient);
}

struct Run {
  std::vector<std::vector<float>> params;
  std::size_t max_in_flight = 0;
};

// kAverage: the ring; kDirectMean: the direct exchange (dense, one message to every other site).
Run run_dts(std::size_t sites, DtsConfig config, MixerKind exchange = MixerKind::kAverage) {
  SiteCluster cluster(sites, exchange);
  Run run;
  run.params.assign(sites, std::vector<float>(kDim, 1.0f));
  std::vector<std::size_t> in_flight(sites), left(sites);
  cluster.run([&](std::size_t r, MixChannel& channel) {
    std::vector<float> u(kDim, 0.0f), g(kDim);
    Dts dts(config, channel, run.params[r], u);
    for (std::uint64_t k = 0; k < kSteps; ++k) {
      for (std::size_t i = 0; i < kDim; ++i) g[i] = gradient(k, r, i);
      dts.step(k, g, learning_rate(k));
    }
    dts.finish();
    in_flight[r] = dts.max_in_flight();
    left[r] = dts.in_flight();
  });
  for (auto l : left) CHECK(l == 0);
  for (auto f : in_flight) run.max_in_flight = std::max(run.max_in_flight, f);
  return run;
}

double max_error(const std::vector<float>& got, const std::vector<double>& want) {
  double worst = 0;
  for (std::size_t i = 0; i < got.size(); ++i)
    worst = std::max(worst, std::abs(got[i] - want[i]) / std::max(1.0, std::abs(want[i])));
  return worst;
}

}  // namespace

TEST_CASE("allreduce SGD matches the single-process reference and keeps replicas bit-identical",
          "[gossip][allreduce][cluster]") {
  const std::size_t sites = 4;
  const double m = 0.9;
  SiteCluster cluster(sites, MixerKind::kAverage);
  std::vector<std::vector<float>> params(sites, std::vector<float>(kDim, 1.0f));
  cluster.run([&](std::size_t r, MixChannel& channel) {
    std::vector<float> u(kDim, 0.0f), g(kDim);
    for (std::uint64_t k = 0; k < kSteps; ++k) {
      for (std::size_t i = 0; i < kDim; ++i) g[i] = gradient(k, r, i);
      average_now(channel, k, g, 10s);
      for (std::size_t i = 0; i < kDim; ++i) {
        u[i] = static_cast<float>(m * u[i] + g[i]);
        params[r][i] -= static_cast<float>(learning_rate(k) * u[i]);
      }
    }
  });
  CHECK(max_error(params[0], allreduce_reference(sites, m)) < 1e-5);
  for (std::size_t j = 1; j < sites; ++j)
    CHECK(std::memcmp(params[j].data(), params[0].data(), kDim * sizeof(float)) == 0);
}

TEST_CASE("dts reaches allreduce's parameters for any delay and period, over the ring or the direct exchange",
          "[gossip][dts][cluster]") {
  const std::size_t sites = 4;
  for (auto [exchange, m] : std::vector<std::pair<MixerKind, double>>{{MixerKind::kAverage, 0.0},
                                                                      {MixerKind::kAverage, 0.9},
                                                                      {MixerKind::kDirectMean, 0.0},
                                                                      {MixerKind::kDirectMean, 0.9}}) {
    auto reference = allreduce_reference(sites, m);
    for (auto [d, p] : std::vector<std::pair<std::uint32_t, std::uint32_t>>{
             {0, 1}, {1, 1}, {2, 1}, {5, 1}, {0, 3}, {1, 2}, {3, 2}, {2, 3}, {4, 4}, {7, 3}})
      for (bool fold : {false, true}) {
        DtsConfig config;
        config.delay = d;
        config.period = p;
        config.momentum = m;
        // Periodic re-averages, carried by the window before them where the shape allows it.
        config.exact_window_mean = fold;
        config.reaverage_every = fold ? 5 : 0;
        auto run = run_dts(sites, config, exchange);
        INFO((exchange == MixerKind::kAverage ? "ring" : "direct")
             << " m=" << m << " D=" << d << " P=" << p << (fold ? " re-averaging every 5 steps" : ""));
        for (const auto& w : run.params) CHECK(max_error(w, reference) < 2e-5);
        // Several averages in flight, never more than ⌈D/P⌉ + 1.
        CHECK(run.max_in_flight <= (d + p - 1) / p + 1);
        if (d >= 2 * p) CHECK(run.max_in_flight >= 2);
      }
  }
}

TEST_CASE("dts sites stopped at different steps apply the windows in flight and start no partial one",
          "[gossip][dts][cluster]") {
  // Sites stopped together (an operator, simulate --stop-at-target) stop a step or two apart. The
  // windows every site closed are applied; an average keyed to each site's own stop step would have
  // no partner, and with these timeouts its wait would fail the run within seconds.
  RoundTimeouts timeouts;
  timeouts.round = 2s;
  timeouts.view_change = 1s;
  for (MixerKind exchange : {MixerKind::kAverage, MixerKind::kDirectMean}) {
    const std::size_t sites = 3;
    SiteCluster cluster(sites, exchange, timeouts);
    std::vector<std::size_t> left(sites);
    cluster.run([&](std::size_t r, MixChannel& channel) {
      std::vector<float> w(kDim, 1.0f), u(kDim, 0.0f), g(kDim);
      DtsConfig config;
      config.delay = 2;
      config.period = 8;
      config.momentum = 0.9;
      config.wait_timeout = 20s;
      Dts dts(config, channel, w, u);
      // The window closed at step 15 is every site's; site r stops after step 17 + r.
      for (std::uint64_t k = 0; k <= 17 + r; ++k) {
        for (std::size_t i = 0; i < kDim; ++i) g[i] = gradient(k, r, i);
        dts.step(k, g, learning_rate(k));
      }
      dts.stop();
      left[r] = dts.in_flight();
    });
    INFO((exchange == MixerKind::kAverage ? "ring" : "direct"));
    for (auto l : left) CHECK(l == 0);
  }
}

TEST_CASE("dts without (or with the wrong) compensation does not reach allreduce", "[gossip][dts][cluster]") {
  const std::size_t sites = 4;
  SECTION("plain SGD with no correction is local SGD") {
    DtsConfig config;
    config.delay = 2;
    config.compensation = DtsCompensation::kNone;
    auto run = run_dts(sites, config);
    CHECK(max_error(run.params[0], allreduce_reference(sites, 0.0)) > 1e-2);
  }
  SECTION("momentum SGD corrected by the vanilla rule drifts") {
    for (auto [d, p] : std::vector<std::pair<std::uint32_t, std::uint32_t>>{{2, 1}, {3, 2}}) {
      DtsConfig config;
      config.delay = d;
      config.period = p;
      config.momentum = 0.9;
      config.compensation = DtsCompensation::kVanillaRule;
      auto run = run_dts(sites, config);
      CHECK(max_error(run.params[0], allreduce_reference(sites, 0.9)) > 1e-2);
    }
  }
}

// With gradients that do depend on the weights, the exact compensation has a stability limit
// (docs/algorithms.md, "dts: stability with momentum"): a site's own reaction to where it stands is
// replaced by the average D steps later, which does not contain it, so the sites' differences follow a
// feedback loop truncated at D steps. On the quadratic f_j(w) = λ/2·|w − c_j|² with momentum 0.9 and
// γλ = 0.5 the sites stay together in the shapes the benchmarks use (D a quarter of P or less, here)
// and fall apart, exponentially, at D = P or P = 1 with D = 4. Deterministic: the same bits every run.
TEST_CASE("dts with weight-dependent gradients: replicas stay together for D well under P, not for D = P",
          "[gossip][dts][cluster]") {
  const std::size_t sites = 4;
  const std::uint64_t steps = 320;
  const double lr = 0.05, lambda = 10.0;
  auto spread_of = [&](std::uint32_t d, std::uint32_t p) {
    SiteCluster cluster(sites, MixerKind::kAverage);
    std::vector<std::vector<double>> w_at(sites, std::vector<double>(steps));
    cluster.run([&](std::size_t r, MixChannel& channel) {
      std::vector<float> w(1, 0.0f), u(1, 0.0f), g(1);
      DtsConfig config;
      config.delay = d;
      config.period = p;
      config.momentum = 0.9;
      Dts dts(config, channel, w, u);
      for (std::uint64_t k = 0; k < steps; ++k) {
        g[0] = static_cast<float>(lambda * (w[0] - static_cast<double>(r)));  // site r's optimum: c_r = r
        dts.step(k, g, lr);
        w_at[r][k] = w[0];
      }
      dts.finish();
    });
    // The largest distance of a site from the sites' mean over the last 64 steps.
    double worst = 0.0;
    for (std::uint64_t k = steps - 64; k < steps; ++k) {
      double mean = 0.0;
      for (std::size_t r = 0; r < sites; ++r) mean += w_at[r][k] / sites;
      for (std::size_t r = 0; r < sites; ++r) worst = std::max(worst, std::abs(w_at[r][k] - mean));
    }
    return worst;
  };
  // The optima lie at most 1.5 from their mean; stable shapes keep the sites within a few times that
  // (local progress pulls each towards its own optimum, momentum overshoots), unstable ones grow
  // without bound (1e26 and more for D = 4 at P = 1 and 4 after 320 steps, 240 and growing at D = P = 16).
  for (auto [d, p] : std::vector<std::pair<std::uint32_t, std::uint32_t>>{{0, 1}, {1, 1}, {2, 16}, {4, 32}, {16, 64}}) {
    INFO("D=" << d << " P=" << p);
    CHECK(spread_of(d, p) < 10.0);
  }
  for (auto [d, p] : std::vector<std::pair<std::uint32_t, std::uint32_t>>{{4, 1}, {4, 4}, {16, 16}}) {
    INFO("D=" << d << " P=" << p);
    CHECK(spread_of(d, p) > 100.0);
  }
}

TEST_CASE("dts refuses nonsense knobs", "[gossip][dts][unit]") {
  MixChannel channel;
  std::vector<float> w(3), u(2);
  DtsConfig config;
  config.period = 0;
  CHECK_THROWS_AS(Dts(config, channel, w, u), meridian::error::UserError);
  config.period = 1;
  config.momentum = 0.9;
  CHECK_THROWS_AS(Dts(config, channel, w, u), meridian::error::InternalError);
  config.momentum = 1.0;
  CHECK_THROWS_AS(Dts(config, channel, w, w), meridian::error::UserError);
}

// When every quantity is exactly representable (integer gradients, γ = 1/8, m = 1/2, a short run so
// the dyadic fractions fit a float's 24 bits), rounding disappears and "reaches allreduce's
// parameters" can be checked with ==.
TEST_CASE("dts equals allreduce bit for bit when all arithmetic is exact", "[gossip][dts][cluster]") {
  const std::size_t sites = 4, dim = 3;
  const std::uint64_t steps = 10;
  auto g_of = [](std::uint64_t k, std::size_t j, std::size_t i) {
    return static_cast<float>(static_cast<int>((k * 7 + j * 5 + i * 3) % 9) - 4);
  };
  for (double m : {0.0, 0.5}) {
    const auto w_ref = testing::allreduce_momentum_reference(
        sites, dim, steps, m, [](std::uint64_t) { return 0.125; }, g_of);
    for (auto [d, p] : std::vector<std::pair<std::uint32_t, std::uint32_t>>{{1, 1}, {2, 1}, {3, 2}, {2, 3}})
      for (bool fold : {false, true}) {
        SiteCluster cluster(sites, MixerKind::kAverage);
        std::vector<std::vector<float>> params(sites, std::vector<float>(dim, 1.0f));
        cluster.run([&](std::size_t r, MixChannel& channel) {
          std::vector<float> u(dim, 0.0f), g(dim);
          DtsConfig config;
          config.delay = d;
          config.period = p;
          config.momentum = m;
          config.exact_window_mean = fold;
          config.reaverage_every = fold ? 3 : 0;
          Dts dts(config, channel, params[r], u);
          for (std::uint64_t k = 0; k < steps; ++k) {
            for (std::size_t i = 0; i < dim; ++i) g[i] = g_of(k, r, i);
            dts.step(k, g, 0.125);
          }
          dts.finish();
        });
        INFO("m=" << m << " D=" << d << " P=" << p << (fold ? " re-averaging every 3 steps" : ""));
        for (const auto& w : params)
          for (std::size_t i = 0; i < dim; ++i) CHECK(double(w[i]) == w_ref[i]);
      }
  }
}

namespace {
// One site alone: the mean is its own data. Records what the trainer asked the communication side for.
class RecordingMixer final : public Mixer {
 public:
  struct Job {
    std::uint64_t step;
    RoundTag tag;
    std::size_t size;
    bool operator==(const Job&) const = default;
  };
  MixReport mix(std::uint64_t step, RoundTag tag, std::span<float> data, double&) override {
    std::lock_guard lock(mu_);
    jobs_.push_back({step, tag, data.size()});
    return {};
  }
  std::vector<Job> jobs() const {
    std::lock_guard lock(mu_);
    return jobs_;
  }

 private:
  mutable std::mutex mu_;
  std::vector<Job> jobs_;
};

// A site alone over a RecordingMixer (5 weights), D = 1, P = 2, m = 0.5, with the given re-average
// knobs, running steps [first, last) and finish(): the jobs it asked for and the re-averages it counted.
struct Recorded {
  std::vector<RecordingMixer::Job> jobs;
  std::uint64_t reaverages = 0;
};
Recorded record_one_site(std::uint64_t reaverage_every, bool exact_window_mean, DtsCompensation compensation,
                         std::uint64_t first, std::uint64_t last) {
  MixChannel channel;
  RecordingMixer mixer;
  MixServer server(channel, mixer, mixer);
  std::vector<float> w(5, 1.0f), u(5, 0.0f), g(5, 0.5f);
  Recorded out;
  {
    MixThread comm(channel, server);
    DtsConfig config;
    config.delay = 1;
    config.period = 2;
    config.momentum = 0.5;
    config.reaverage_every = reaverage_every;
    config.compensation = compensation;
    config.exact_window_mean = exact_window_mean;
    Dts dts(config, channel, w, u);
    for (std::uint64_t k = first; k < last; ++k) dts.step(k, g, 0.25);
    dts.finish();
    out.reaverages = dts.reaverages();
  }
  out.jobs = mixer.jobs();
  return out;
}
}  // namespace

TEST_CASE("dts carries a re-average due at a window start in the window before it when the mean is exact",
          "[gossip][dts][unit]") {
  const std::size_t n = 5;
  auto run = [](bool exact_window_mean, DtsCompensation compensation) {
    const auto r = record_one_site(4, exact_window_mean, compensation, 0, 12);
    return std::make_pair(r.jobs, r.reaverages);
  };
  using Job = RecordingMixer::Job;
  const auto mix = RoundTag::kMix, reaverage = RoundTag::kReaverage;
  // Windows [0,2), [2,4), ...: the first view's re-average is learnt at step 2 and done at once; the
  // periodic ones at the starts 4, 8 and 12 travel with the windows closing at 3, 7 and 11 (which send
  // w and u instead of W and U; the last one is applied by finish(), where the separate one never comes).
  const auto [folded, folded_count] = run(true, DtsCompensation::kExact);
  CHECK(folded == std::vector<Job>{{1, mix, 2 * n},
                                   {2, reaverage, 2 * n},
                                   {3, mix, 2 * n},
                                   {5, mix, 2 * n},
                                   {7, mix, 2 * n},
                                   {9, mix, 2 * n},
                                   {11, mix, 2 * n}});
  CHECK(folded_count == 4);
  // Not with a compressed (inexact) mean, nor when the site never applied its own window.
  for (auto [exact, compensation] : std::vector<std::pair<bool, DtsCompensation>>{{false, DtsCompensation::kExact},
                                                                                  {true, DtsCompensation::kStale}}) {
    const auto [separate, count] = run(exact, compensation);
    CHECK(separate == std::vector<Job>{{1, mix, 2 * n},
                                       {2, reaverage, 2 * n},
                                       {3, mix, 2 * n},
                                       {4, reaverage, 2 * n},
                                       {5, mix, 2 * n},
                                       {7, mix, 2 * n},
                                       {8, reaverage, 2 * n},
                                       {9, mix, 2 * n},
                                       {11, mix, 2 * n}});
    CHECK(count == 3);
  }
}

TEST_CASE(
    "dts at a site that starts at a window start leaves the periodic re-average there to the window the others closed",
    "[gossip][dts][unit]") {
  // A site that rejoins at round 26 (P = 2, re-averages every 25 steps: one is due at the window start
  // 26). Where re-averages travel with windows, the others carried it in the window closing at 25, which
  // this site was not in; a separate re-average here would wait for a round nobody else joins (a rejoin
  // test hung on it). Where they do not travel, the others run it here, and so must this site.
  auto jobs_from_26 = [](bool exact_window_mean) {
    return record_one_site(25, exact_window_mean, DtsCompensation::kExact, 26, 32).jobs;
  };
  const RecordingMixer::Job periodic{26, RoundTag::kReaverage, 10};
  const auto carried = jobs_from_26(true);
  CHECK(std::find(carried.begin(), carried.end(), periodic) == carried.end());
  const auto separate = jobs_from_26(false);
  CHECK(std::find(separate.begin(), separate.end(), periodic) != separate.end());
}

namespace {
// One site alone (the mean is its own data) whose mix of one step waits until the test opens it.
class GatedMixer final : public Mixer {
 public:
  explicit GatedMixer(std::uint64_t gated_step) : gated_step_(gated_step) {}
  MixReport mix(std::uint64_t step, RoundTag tag, std::span<float>, double&) override {
    if (step == gated_step_ && tag == RoundTag::kMix) {
      std::unique_lock lock(mu_);
      opened_.wait_for(lock, 10s, [&] { return open_; });
    }
    return {};
  }
  void open() {
    {
      std::lock_guard lock(mu_);
      open_ = true;
    }
    opened_.notify_all();
  }

 private:
  std::uint64_t gated_step_;
  std::mutex mu_;
  std::condition_variable opened_;
  bool open_ = false;
};
}  // namespace

TEST_CASE("dts does not wait at the window start for a re-average that travels with the window before it",
          "[gossip][dts][unit]") {
  // Windows [0,4), D = 2: the periodic re-average due at step 4 travels with the window closing at 3,
  // whose mean is needed before step 5. Step 4 must run while that exchange is still held; a trainer
  // that waited for it at the window start would hit the wait timeout (MixError) instead.
  const std::size_t n = 5;
  MixChannel channel;
  GatedMixer mixer(3);
  MixServer server(channel, mixer, mixer);
  std::vector<float> w(n, 1.0f), u(n, 0.0f), g(n, 0.5f);
  MixThread comm(channel, server);
  DtsConfig config;
  config.delay = 2;
  config.period = 4;
  config.momentum = 0.5;
  config.reaverage_every = 4;
  config.exact_window_mean = true;
  config.wait_timeout = 2s;
  Dts dts(config, channel, w, u);
  for (std::uint64_t k = 0; k <= 4; ++k) REQUIRE_NOTHROW(dts.step(k, g, 0.25));
  CHECK(dts.in_flight() == 1);
  mixer.open();
  for (std::uint64_t k = 5; k < 8; ++k) REQUIRE_NOTHROW(dts.step(k, g, 0.25));
  dts.finish();
  CHECK(dts.reaverages() == 2);  // the one due at 4 and the one due at 8 (carried by the window closing at 7)
}

TEST_CASE("dts takes a re-average that travelled with a window in as if it had replaced the weights then",
          "[gossip][dts][cluster]") {
  // Sites that start apart (as after a rejoin from an older checkpoint): every re-average then moves
  // the weights and the momentum buffer. Carried with the window and taken in D steps later as a
  // correction, it must land where a separate re-average at the window start lands.
  const std::size_t sites = 4;
  auto run = [&](bool carried) {
    SiteCluster cluster(sites, MixerKind::kAverage);
    std::vector<std::vector<float>> params(sites), momenta(sites);
    cluster.run([&](std::size_t r, MixChannel& channel) {
      params[r].assign(kDim, 1.0f + 0.5f * static_cast<float>(r));
      momenta[r].assign(kDim, 0.3f * static_cast<float>(r) - 0.4f);
      std::vector<float> g(kDim);
      DtsConfig config;
      config.delay = 3;
      config.period = 4;
      config.momentum = 0.9;
      config.reaverage_every = 8;
      config.exact_window_mean = carried;
      Dts dts(config, channel, params[r], momenta[r]);
      for (std::uint64_t k = 0; k < 20; ++k) {
        for (std::size_t i = 0; i < kDim; ++i) g[i] = gradient(k, r, i);
        dts.step(k, g, learning_rate(k));
      }
      dts.finish();
    });
    return std::make_pair(params, momenta);
  };
  const auto [carried_w, carried_u] = run(true);
  const auto [separate_w, separate_u] = run(false);
  for (std::size_t r = 0; r < sites; ++r) {
    INFO("site " << r);
    for (std::size_t i = 0; i < kDim; ++i) {
      CHECK(carried_w[r][i] == Approx(separate_w[r][i]).epsilon(1e-5));
      CHECK(carried_u[r][i] == Approx(separate_u[r][i]).epsilon(1e-5));
    }
  }
  // The sites really started apart and were pulled together: all end equal.
  for (std::size_t r = 1; r < sites; ++r)
    for (std::size_t i = 0; i < kDim; ++i) CHECK(carried_w[r][i] == Approx(carried_w[0][i]).epsilon(1e-5));
}

TEST_CASE("dts re-averages carry the normalization statistics, separately or with the window before them",
          "[gossip][dts][norm-state][cluster]") {
  // Each site's statistics start at its rank and drift by its own amount every step before step 6 (as
  // running statistics follow each site's batches); the re-averages every 4 steps (with momentum, P = 2,
  // D = 1) make them the federation's mean. All values are dyadic, so the mean is exact: 1 + 3 = 4.
  const std::size_t sites = 3;
  for (const bool fold : {false, true}) {
    DtsConfig config;
    config.delay = 1;
    config.period = 2;
    config.momentum = 0.9;
    config.reaverage_every = 4;
    config.exact_window_mean = fold;
    SiteCluster cluster(sites, MixerKind::kAverage);
    std::vector<std::vector<float>> stats(sites), params(sites, std::vector<float>(kDim, 1.0f));
    std::vector<std::uint64_t> reaverages(sites);
    cluster.run([&](std::size_t r, MixChannel& channel) {
      std::vector<float> u(kDim, 0.0f), g(kDim);
      stats[r] = {static_cast<float>(r), 2.0f * static_cast<float>(r)};
      Dts dts(config, channel, params[r], u, stats[r]);
      for (std::uint64_t k = 0; k < 12; ++k) {
        if (k < 6) {
          stats[r][0] += 0.25f * static_cast<float>(r + 1);
          stats[r][1] += 0.5f * static_cast<float>(r + 1);
        }
        for (std::size_t i = 0; i < kDim; ++i) g[i] = gradient(k, r, i);
        dts.step(k, g, learning_rate(k));
      }
      dts.finish();
      reaverages[r] = dts.reaverages();
    });
    INFO((fold ? "re-averages travel with the windows" : "separate re-averages"));
    for (std::size_t r = 0; r < sites; ++r) {
      CHECK(reaverages[r] >= 2);
      CHECK(stats[r] == std::vector<float>{4.0f, 8.0f});
    }
  }
}
