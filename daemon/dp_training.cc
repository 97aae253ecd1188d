// DP-SGD's place in a site (privacy/dp_sgd.h): the model check before anything is set up, the noise
// multiplier from the budget, the budget a resumed site keeps, and its sealed record in checkpoints.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>

#include "daemon/site_daemon_impl.h"
#include "privacy/rdp_accountant.h"

namespace meridian::daemon {
namespace {

std::string number(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.4g", v);
  return text;
}

}  // namespace

void SiteDaemon::Impl::check_dp_model() {
  if (const auto obstacle = model->per_example_obstacle())
    throw SiteConfigError("invalid site configuration:\n  --dp-*: DP-SGD cannot run on this model: " + *obstacle);
}

void SiteDaemon::Impl::prepare_dp() {
  const bool sealed = resume && !resume->privacy_budget.empty();
  if (!config.dp()) {
    if (sealed)
      throw error::UserError("the checkpoint's run trained with DP-SGD: restart with its --dp-* settings to keep its "
                             "guarantee (or use another --checkpoint-dir for a run without DP)");
    return;
  }
  // The key of the budget's seal comes from the site's secret key where it has one (budget_record.h).
  if (identity) {
    budget_seal = std::make_unique<privacy::BudgetSeal>(identity->keys.secret_key);
  } else {
    spdlog::warn("DP-SGD without a secret key (--insecure): the checkpoints' privacy budget is sealed with a key "
                 "from the site's name, which detects careless edits but not deliberate ones");
    budget_seal = std::make_unique<privacy::BudgetSeal>(config.name);
  }
  const std::size_t rows = data.train.rows, batch = static_cast<std::size_t>(config.batch);
  privacy::DpSgdOptions options;
  options.clip = config.dp_clip;
  options.delta = config.dp_delta;
  if (config.dp_epsilon > 0) options.epsilon_budget = config.dp_epsilon;
  std::uint64_t spent_steps = 0;
  if (resume) {
    if (!sealed)
      throw error::UserError("the checkpoint holds no privacy budget: its model was trained without DP-SGD, so no "
                             "budget can be promised for it; use another --checkpoint-dir to start a DP-SGD run");
    privacy::BudgetRecord record;
    try {
      record = budget_seal->open(resume->privacy_budget, resume->step, resume->model_fingerprint);
    } catch (const privacy::BudgetRecordError& e) {
      throw CheckpointError(std::string("refusing the checkpoint at round ") + std::to_string(resume->step) + ": " +
                            e.what());
    }
    if (record.clip != options.clip || record.delta != options.delta)
      throw error::UserError("the checkpoint's run used --dp-clip " + number(record.clip) + " --dp-delta " +
                             number(record.delta) + ", this site is started with --dp-clip " + number(options.clip) +
                             " --dp-delta " + number(options.delta) + ": restart with the checkpoint's");
    const double q = std::min(1.0, static_cast<double>(batch) / static_cast<double>(rows));
    if (record.sample_rate != q)
      throw error::UserError("the checkpoint's run sampled its batches at rate " + number(record.sample_rate) +
                             ", this site would at " + number(q) + " (--batch " + std::to_string(batch) + " of " +
                             std::to_string(rows) + " examples): restart with the checkpoint's batch and data");
    // The accountant's figures hold for one sample rate and noise multiplier: the run keeps the ones
    // it started with, and the steps they were spent on.
    options.noise_multiplier = record.noise_multiplier;
    spent_steps = record.steps;
  } else if (config.dp_noise_multiplier > 0) {
    options.noise_multiplier = config.dp_noise_multiplier;
  } else {
    const double q = std::min(1.0, static_cast<double>(batch) / static_cast<double>(rows));
    options.noise_multiplier = privacy::noise_multiplier_for(config.dp_epsilon, config.dp_delta, q, data.total_steps);
  }
  dp = std::make_unique<privacy::DpSgd>(options, rows, batch, spent_steps);
  spdlog::info("DP-SGD: Poisson sampling at rate {} (expected batch {}), clip {}, noise multiplier {}; {}{}",
               number(dp->sample_rate()), number(dp->expected_batch()), number(options.clip),
               number(options.noise_multiplier), dp_spent_text(),
               dp->max_steps() ? "; the budget allows " + std::to_string(*dp->max_steps()) + " steps" : "");
  if (config.dp_delta * static_cast<double>(rows) >= 1.0)
    spdlog::warn("DP-SGD: --dp-delta {} is not below 1 / {} examples: such a delta allows a record to leak whole",
                 number(config.dp_delta), rows);
}

std::span<const std::uint8_t> SiteDaemon::Impl::sealed_budget(std::uint64_t round) {
  if (!dp) return {};
  const auto& o = dp->options();
  const privacy::BudgetRecord record{dp->sample_rate(), o.noise_multiplier, o.delta, o.clip, o.epsilon_budget,
                                     dp->steps()};
  budget_bytes = budget_seal->seal(record, round, model->fingerprint());
  return budget_bytes;
}

std::string SiteDaemon::Impl::dp_spent_text() const {
  if (!dp) return "";
  const auto spent = dp->spent();
  const auto& o = dp->options();
  return "epsilon " + number(spent.epsilon) + (o.epsilon_budget ? " of " + number(*o.epsilon_budget) : "") +
         " spent (delta " + number(o.delta) + ", " + std::to_string(dp->steps()) + " steps)";
}

}  // namespace meridian::daemon
