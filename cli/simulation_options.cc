#include "cli/simulation_options.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>

#include "cli/algorithm_variant.h"
#include "error/error.h"
#include "peer/wan_model.h"

namespace meridian::cli {

std::vector<std::string> split_algorithm_list(const std::string& text) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (true) {
    const auto comma = text.find(',', start);
    std::string part = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    const auto first = part.find_first_not_of(" \t");
    const auto last = part.find_last_not_of(" \t");
    out.push_back(first == std::string::npos ? "" : part.substr(first, last - first + 1));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

bool SimulationOptions::was_given(std::string_view option) const {
  return std::find(given.begin(), given.end(), option) != given.end();
}

std::string simulated_site_name(int index) { return "site-" + std::to_string(index); }

std::string simulated_site_region(const std::string& wan, int index) {
  try {
    const peer::WanModel model = peer::parse_wan_spec(wan);
    if (model.regions() > 1) return model.region_name(model.region_of_site(static_cast<std::size_t>(index)));
  } catch (const error::UserError&) {
    // site_config_problems reports the bad --wan text with its hint.
  }
  return "";
}

std::vector<std::string> simulation_problems(const SimulationOptions& o) {
  std::vector<std::string> problems;
  // A simulation on one machine: more sites than this would only measure the scheduler.
  constexpr int kMaxSites = 64;
  if (o.sites < 1 || o.sites > kMaxSites)
    problems.push_back("--sites: " + std::to_string(o.sites) + " is not in 1.." + std::to_string(kMaxSites) +
                       " (e.g. --sites 4)");
  if (o.algos.empty()) problems.push_back("--algo: no algorithm given (e.g. --algo sgp,allreduce)");
  std::vector<std::string> seen;
  for (const auto& a : o.algos) {
    if (a.empty()) {
      problems.push_back("--algo: an empty name in the list (e.g. --algo sgp,allreduce)");
      continue;
    }
    if (std::find(seen.begin(), seen.end(), a) != seen.end()) problems.push_back("--algo: '" + a + "' is listed twice");
    seen.push_back(a);
  }
  if (o.byzantine_site < -1 || o.byzantine_site >= o.sites)
    problems.push_back("--byzantine: site " + std::to_string(o.byzantine_site) + " is not in 0.." +
                       std::to_string(o.sites - 1) + " (-1 = none; e.g. --byzantine 7)");
  if (!(std::isfinite(o.byzantine_scale) && o.byzantine_scale > 0))
    problems.push_back("--byzantine-scale: must be a positive number (e.g. --byzantine-scale 100)");
  if (o.threads_per_site < 1) problems.push_back("--threads-per-site: must be at least 1 (e.g. --threads-per-site 1)");
  if (o.eval_every < 1) problems.push_back("--eval-every: must be at least 1 step (e.g. --eval-every 50)");
  if (!(o.target_accuracy > 0 && o.target_accuracy < 1)) {
    char value[32];
    std::snprintf(value, sizeof value, "%g", o.target_accuracy);
    problems.push_back(std::string("--target-accuracy: ") + value +
                       " is not a fraction in (0, 1) (e.g. --target-accuracy 0.8 for 80%)");
  }
  if (!(o.timeout_seconds > 0) || !std::isfinite(o.timeout_seconds))
    problems.push_back("--timeout: must be a positive number of seconds (e.g. --timeout 1800)");
  if (o.out_dir.empty()) problems.push_back("--out: empty directory name (e.g. --out sim-results)");
  if (!o.site_train.empty()) {
    if (static_cast<int>(o.site_train.size()) != o.sites)
      problems.push_back("--site-train: " + std::to_string(o.site_train.size()) +
                         (o.site_train.size() == 1 ? " path for " : " paths for ") + std::to_string(o.sites) +
                         " sites (give one per site, in site order)");
    if (!o.site.train.empty())
      problems.push_back("--site-train: replaces --train " + o.site.train +
                         " (split one dataset with --train, or give each site its own with --site-train)");
  }

  if (!o.trainer_command.empty()) {
    if (o.trainer_command.find_first_not_of(" \t\n") == std::string::npos)
      problems.push_back("--trainer-command: empty (e.g. --trainer-command 'python3 train.py')");
    if (!o.site_train.empty())
      problems.push_back(
          "--site-train: the sites' trainer is --trainer-command, which reads its own data "
          "(MERIDIAN_SITE_INDEX tells it which site it trains for)");
  }

  // The shared settings as one site of each algorithm would see them; simulate's own per-site fields
  // are valid by construction, so every problem reported here is one the user can fix.
  for (const auto& a : seen) {
    daemon::SiteConfig config = o.site;
    config.name = simulated_site_name(0);
    if (!o.trainer_command.empty()) config.trainer = "attached";
    const AlgorithmVariantParse parsed = parse_algorithm_variant(a);
    std::optional<std::string> problem;
    if (!parsed.error.empty()) problem = parsed.error;
    else problem = apply_algorithm_variant(parsed.variant, config, [&o](std::string_view n) { return o.was_given(n); });
    if (problem) {
      problems.push_back(*problem);
      continue;
    }
    config.site_count = std::max(o.sites, 1);
    config.site_index = 0;
    // Each site's own path is checked as its site would check it (existence and format).
    for (const auto& path : o.site_train) {
      daemon::SiteConfig own = config;
      own.train = path;
      own.site_count = 1;
      for (auto p : daemon::site_config_problems(own)) {
        // The path came from --site-train: name that option, not the site's --train it became.
        if (p.starts_with("--train: ")) p = "--site-train: " + p.substr(9);
        if (std::find(problems.begin(), problems.end(), p) == problems.end()) problems.push_back(std::move(p));
      }
    }
    if (!o.site_train.empty()) continue;
    config.listen = "tcp://127.0.0.1:7400";
    config.threads = o.threads_per_site;
    config.metrics_address = "off";
    // Keys do not exist yet; simulate creates them (unless --insecure), so the check names placeholders.
    if (!config.insecure) {
      config.key_dir = "keys";
      config.roster = "roster.txt";
    }
    config.region = simulated_site_region(config.wan, 0);
    for (auto& p : daemon::site_config_problems(config)) {
      if (std::find(problems.begin(), problems.end(), p) == problems.end()) problems.push_back(std::move(p));
    }
  }
  return problems;
}

}  // namespace meridian::cli
