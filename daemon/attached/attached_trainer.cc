#include "daemon/attached/attached_trainer.h"

#include <algorithm>

#include "daemon/algorithms/optimizer_trainer.h"
#include "daemon/algorithms/registry.h"

namespace meridian::daemon {

void AttachedTrainer::restore(const Checkpoint& cp) {
  algorithms::check_checkpoint_size(cp.parameters.size(), parameters_.size(), "parameters");
  std::copy(cp.parameters.begin(), cp.parameters.end(), parameters_.begin());
}

std::vector<std::string> attached_algorithm_names() {
  std::vector<std::string> names;
  for (const auto* algorithm : algorithms::all_algorithms())
    if (algorithm->attached_hook().has_value()) names.emplace_back(algorithm->name());
  return names;
}

std::string attached_support_problem(const SiteSettings& settings) {
  const auto& algorithm = settings.algorithm();
  if (algorithm.attached_hook().has_value()) return "";
  std::string names;
  for (const auto& name : attached_algorithm_names()) names += (names.empty() ? "" : ", ") + name;
  return "--algo " + std::string(algorithm.name()) + " does not run with --trainer attached; attached sites run " +
         names;
}

TrainerHook attached_hook(const SiteSettings& settings) {
  const auto hook = settings.algorithm().attached_hook();
  if (!hook) throw error::InternalError(attached_support_problem(settings));
  return *hook;
}

std::unique_ptr<AttachedTrainer> make_attached_trainer(const AttachedContext& context) {
  const auto& algorithm = context.settings.algorithm();
  if (!algorithm.attached_hook()) throw error::InternalError(attached_support_problem(context.settings));
  return algorithm.make_attached_trainer(context);
}

}  // namespace meridian::daemon
