#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>

#include "gossip/delayed_mixing.h"
#include "gossip/group_grid.h"
#include "site_cluster.h"

using namespace meridian::gossip;
using meridian::gossip::testing::MixerKind;
using meridian::gossip::testing::SiteCluster;

TEST_CASE("dsync grid: near-square groups, and everyone reaches everyone within the bound", "[gossip][dsync][unit]") {
  CHECK(group_grid_for(6).exact);
  CHECK(group_grid_for(16).columns == 4);
  CHECK(group_grid_for(12).columns == 4);  // 3 × 4
  for (std::size_t n : {5u, 7u, 13u, 22u}) CHECK_FALSE(group_grid_for(n).exact);
  for (std::size_t n = 1; n <= 40; ++n) {
    GroupGrid grid = group_grid_for(n);
    for (std::uint64_t first = 0; first < 2; ++first) {
      // Every site lies in exactly one group per step, and groups are consistent between members.
      for (std::uint64_t step = first; step < first + 2; ++step)
        for (std::size_t r = 0; r < n; ++r) {
          auto g = group_at(grid, r, step);
          CHECK(std::count(g.begin(), g.end(), r) == 1);
          CHECK(std::is_sorted(g.begin(), g.end()));
          for (auto other : g) CHECK(group_at(grid, other, step) == g);
          if (n >= 4) CHECK(g.size() <= 2 * grid.columns);
        }
      std::vector<std::vector<bool>> knows(n, std::vector<bool>(n, false));
      for (std::size_t r = 0; r < n; ++r) knows[r][r] = true;
      for (std::uint64_t step = first; step < first + grid.reach_steps(); ++step) {
        auto next = knows;
        for (std::size_t r = 0; r < n; ++r)
          for (auto other : group_at(grid, r, step))
            for (std::size_t i = 0; i < n; ++i) next[r][i] = next[r][i] || knows[other][i];
        knows = next;
      }
      INFO("n=" << n << " first step " << first);
      for (auto& row : knows) CHECK(std::all_of(row.begin(), row.end(), [](bool b) { return b; }));
    }
  }
}

TEST_CASE("dsync grid: --grid ROWSxCOLS lays out the groups as given, auto follows the rule", "[gossip][dsync][unit]") {
  // auto is the documented rule (group_grid.h): 4 = 2·2 and 12 = 3·4 exact; 7 ragged with ⌈√7⌉ = 3 columns.
  for (std::size_t n = 0; n <= 40; ++n) {
    const auto automatic = group_grid_for(n, GridSpec{});
    const auto rule = group_grid_for(n);
    CHECK(automatic.sites == rule.sites);
    CHECK(automatic.columns == rule.columns);
    CHECK(automatic.exact == rule.exact);
  }
  CHECK(group_grid_for(4).columns == 2);
  CHECK(group_grid_for(7).columns == 3);
  CHECK_FALSE(group_grid_for(7).exact);

  // On 4 sites, 1x4 is one row (the step-0 group is everyone) and 2x2 two rows of two.
  const auto one_row = group_grid_for(4, GridSpec{1, 4});
  const auto square = group_grid_for(4, GridSpec{2, 2});
  CHECK(group_at(one_row, 0, 0) == std::vector<std::size_t>{0, 1, 2, 3});
  CHECK(group_at(one_row, 0, 1) == std::vector<std::size_t>{0});
  CHECK(group_at(square, 0, 0) == std::vector<std::size_t>{0, 1});
  CHECK(group_at(square, 0, 1) == std::vector<std::size_t>{0, 2});
  CHECK(group_at(one_row, 0, 0) != group_at(square, 0, 0));
  // 4x1: one column, so the odd step is everyone.
  CHECK(group_at(group_grid_for(4, GridSpec{4, 1}), 2, 1) == std::vector<std::size_t>{0, 1, 2, 3});

  // A view of another size than ROWSxCOLS keeps COLS columns (a short last row), or one row when
  // smaller than that; information still reaches everyone within reach_steps().
  CHECK(group_grid_for(5, GridSpec{2, 3}).columns == 3);
  CHECK_FALSE(group_grid_for(5, GridSpec{2, 3}).exact);
  CHECK(group_grid_for(2, GridSpec{2, 3}).columns == 2);
  for (int cols = 1; cols <= 8; ++cols) {
    for (std::size_t n = 1; n <= 20; ++n) {
      const auto grid = group_grid_for(n, GridSpec{2, cols});
      for (std::uint64_t first = 0; first < 2; ++first) {
        std::vector<std::vector<bool>> knows(n, std::vector<bool>(n, false));
        for (std::size_t r = 0; r < n; ++r) knows[r][r] = true;
        for (std::uint64_t step = first; step < first + grid.reach_steps(); ++step) {
          auto next = knows;
          for (std::size_t r = 0; r < n; ++r)
            for (auto other : group_at(grid, r, step))
              for (std::size_t i = 0; i < n; ++i) next[r][i] = next[r][i] || knows[other][i];
          knows = next;
        }
        INFO("n=" << n << " cols=" << cols << " first step " << first);
        for (auto& row : knows) CHECK(std::all_of(row.begin(), row.end(), [](bool b) { return b; }));
      }
    }
  }
}

TEST_CASE("dsync mixes over the grid it is given: 1x4 and 2x2 on 4 sites average different groups",
          "[gossip][dsync][cluster]") {
  // One mix at step 0 (a row step) of one-hot vectors: what each site holds afterwards is its group.
  const auto mix_once = [](GridSpec grid) {
    const std::size_t n = 4;
    SiteCluster cluster(n, MixerKind::kGroup, {}, 1, {}, {}, 100.0, {}, 0, grid);
    std::vector<std::vector<float>> params(n, std::vector<float>(n, 0.0f));
    for (std::size_t r = 0; r < n; ++r) params[r][r] = 1.0f;
    cluster.run([&](std::size_t r, MixChannel& channel) {
      DelayedMixing dsync({}, channel, params[r]);
      dsync.after_step(0);
    });
    return params;
  };
  const auto one_row = mix_once(GridSpec{1, 4});
  const auto square = mix_once(GridSpec{2, 2});
  const auto automatic = mix_once(GridSpec{});
  for (std::size_t r = 0; r < 4; ++r) {
    INFO("site " << r);
    CHECK(one_row[r] == std::vector<float>(4, 0.25f));
    std::vector<float> pair(4, 0.0f);
    pair[r / 2 * 2] = pair[r / 2 * 2 + 1] = 0.5f;
    CHECK(square[r] == pair);
    CHECK(automatic[r] == square[r]);  // 4 sites: the rule picks 2x2
  }
}

TEST_CASE("dsync mixes parameters and statistics so every site's information reaches all", "[gossip][dsync][cluster]") {
  for (std::size_t n : {4u, 5u, 6u, 7u, 13u}) {
    for (std::uint64_t first : {0u, 1u}) {
      SiteCluster cluster(n, MixerKind::kGroup);
      GroupGrid grid = group_grid_for(n);
      std::vector<std::vector<float>> params(n, std::vector<float>(n, 0.0f)), stats(n, std::vector<float>(1));
      for (std::size_t r = 0; r < n; ++r) {
        params[r][r] = 1.0f;  // one-hot: coordinate i carries site i's information
        stats[r][0] = static_cast<float>(r);
      }
      cluster.run([&](std::size_t r, MixChannel& channel) {
        DelayedMixing dsync({}, channel, params[r], stats[r]);
        for (std::uint64_t k = first; k < first + grid.reach_steps(); ++k) dsync.after_step(k);
      });
      INFO("n=" << n << " first step " << first);
      for (std::size_t r = 0; r < n; ++r) {
        for (float v : params[r]) CHECK(v > 0.0f);
        if (grid.exact) {
          for (float v : params[r]) CHECK(v == Approx(1.0 / n).epsilon(1e-6));
          CHECK(stats[r][0] == Approx((n - 1) / 2.0).epsilon(1e-6));
        }
      }
    }
  }
}

namespace {
// Six sites start at 0..5 with a shared second coordinate that every site advances by 0.5 per step.
std::vector<std::vector<float>> run_delayed_dsync(DelayedMixingConfig config, std::uint64_t steps) {
  const std::size_t n = 6;
  SiteCluster cluster(n, MixerKind::kGroup);
  std::vector<std::vector<float>> params(n, std::vector<float>(2));
  for (std::size_t r = 0; r < n; ++r) params[r] = {static_cast<float>(r), 1.0f};
  std::vector<std::size_t> most_in_flight(n);
  cluster.run([&](std::size_t r, MixChannel& channel) {
    DelayedMixing dsync(config, channel, params[r]);
    for (std::uint64_t k = 0; k < steps; ++k) {
      params[r][1] += 0.5f;  // local progress: kept, not averaged away
      dsync.after_step(k);
      most_in_flight[r] = std::max(most_in_flight[r], dsync.in_flight());
    }
    dsync.finish();
  });
  // Catch2's assertions are not thread-safe: checked here, after the site threads joined.
  for (auto m : most_in_flight) CHECK(m <= config.delay);
  return params;
}
}  // namespace

TEST_CASE("dsync with delay D keeps the local progress and still reaches consensus", "[gossip][dsync][cluster]") {
  for (std::uint32_t d : {1u, 2u}) {
    DelayedMixingConfig config;
    config.delay = d;
    auto params = run_delayed_dsync(config, 60);
    for (const auto& p : params) {
      CHECK(p[0] == Approx(2.5).epsilon(1e-5));
      CHECK(p[1] == Approx(31.0).epsilon(1e-5));
    }
  }
}

TEST_CASE("delayed mixing beyond D = 2 needs a damped mix step", "[gossip][dsync][cluster]") {
  DelayedMixingConfig config;
  config.delay = 3;
  // The rule alone: the exact re-average that a site's first view triggers would reset the
  // oscillation once and hide it.
  config.reaverage_after_view_change = false;
  auto literal = run_delayed_dsync(config, 60);  // x ← x + (m_s − x_s) oscillates with period 6
  double spread = 0;
  for (const auto& p : literal) spread = std::max(spread, double(std::abs(p[0] - literal[0][0])));
  CHECK(spread > 1.0);
  for (std::uint32_t d : {3u, 5u}) {
    config.delay = d;
    config.mix_step = 1.0 / d;
    auto damped = run_delayed_dsync(config, 200);
    for (const auto& p : damped) {
      CHECK(p[0] == Approx(2.5).epsilon(1e-5));
      CHECK(p[1] == Approx(101.0).epsilon(1e-5));
    }
  }
}
