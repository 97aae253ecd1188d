// Before the first step: the input scaling every site of the federation uses (daemon/federation/input_scaling_exchange.h
// describes the exchange, docs/datasets.md the rule).
#include <algorithm>
#include <thread>

#include <spdlog/spdlog.h>

#include "daemon/status/human_format.h"
#include "daemon/site_daemon_impl.h"

namespace meridian::daemon {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// "0.5, 0.25, ... (784 values)": the first values of a scaling, for the log.
std::string first_values(const std::vector<float>& values) {
  constexpr std::size_t kShown = 6;
  std::string out;
  for (std::size_t i = 0; i < std::min(values.size(), kShown); ++i) {
    if (!out.empty()) out += ", ";
    out += fmt::format("{:.6g}", values[i]);
  }
  if (values.size() > kShown) out += fmt::format(", ... ({} values)", values.size());
  return out;
}

}  // namespace

void SiteDaemon::Impl::settle_normalization(bool resumed) {
  if (!data.normalization_pending) return;
  // A resuming site keeps the scaling its checkpoint was trained with (written there since the
  // scaling was agreed): the federation's moments have not changed, and its peers use the same.
  if (resumed && resume && resume->input_mean.size() == data.train.dim &&
      resume->input_stddev.size() == data.train.dim) {
    apply_normalization(data, models::data::Standardization{resume->input_mean, resume->input_stddev});
    scaling.agree(data.train.standardization);
    spdlog::info("input scaling from the checkpoint: mean {}; std {}", first_values(data.train.standardization.mean),
                 first_values(data.train.standardization.stddev));
    return;
  }
  if (!algo.communicates()) {
    apply_normalization(data, models::data::standardization_from(data.moments, data.train));
    spdlog::info("input scaling from this site's {} rows: mean {}; std {}", data.train.rows,
                 first_values(data.train.standardization.mean), first_values(data.train.standardization.stddev));
    return;
  }
  const auto view = transport->latest_view();
  // Re-sent each second, like the run plans (daemon/federation/run_plan.h): a first message may go out before a
  // peer's connection is up. The deadline is that of a round: every member is alive in the view.
  const auto deadline = Clock::now() + round_timeout_bound(config) + std::chrono::seconds(10);
  auto next_send = Clock::now();
  while (!stop) {
    if (Clock::now() >= next_send) {
      for (const auto& m : view.members)
        if (m != config.name) transport->send(m, moments_message(data.moments));
      next_send = Clock::now() + std::chrono::seconds(1);
    }
    if (auto heard = scaling.heard_scaling()) {
      apply_normalization(data, *heard);
      scaling.agree(data.train.standardization);
      spdlog::info("input scaling of the running federation: mean {}; std {}",
                   first_values(data.train.standardization.mean), first_values(data.train.standardization.stddev));
      return;
    }
    auto heard = scaling.moments();
    heard[config.name] = data.moments;
    std::vector<std::string> missing;
    for (const auto& m : view.members)
      if (!heard.contains(m)) missing.push_back(m);
    if (missing.empty()) {
      // In the order of the names (std::map's): every site adds the same numbers in the same order.
      std::vector<models::data::FeatureMoments> parts;
      for (const auto& [name, moments] : heard) {
        if (std::find(view.members.begin(), view.members.end(), name) == view.members.end()) continue;
        // Equal terms mean equal widths; a peer that sends others is broken, and pooling cannot go on.
        if (moments.sum.size() != data.moments.sum.size())
          throw error::PeerError("'" + name + "' sent input statistics of " + std::to_string(moments.sum.size()) +
                                 " features or channels, this site has " + std::to_string(data.moments.sum.size()));
        parts.push_back(moments);
      }
      const auto pooled = models::data::combine(parts);
      const std::size_t per_row = data.train.channels > 0 ? data.train.height * data.train.width : 1;
      const std::uint64_t rows = pooled.count / std::max<std::size_t>(1, per_row);
      apply_normalization(data, models::data::standardization_from(pooled, data.train));
      scaling.agree(data.train.standardization);
      spdlog::info("input scaling agreed over {} ({} training rows): mean {}; std {}",
                   format_count(parts.size(), "site"), rows, first_values(data.train.standardization.mean),
                   first_values(data.train.standardization.stddev));
      return;
    }
    if (Clock::now() >= deadline) {
      throw error::PeerError("no input statistics from " + join_names(missing) + " within --round-timeout " +
                             format_duration(std::chrono::duration<double>(round_timeout_bound(config)).count()) +
                             " + 10 s: the sites cannot agree on the input scaling (--normalize); check that they "
                             "run the same Meridian version" +
                             known_causes());
    }
    std::this_thread::sleep_for(milliseconds(20));
  }
}

}  // namespace meridian::daemon
