#include "daemon/algorithms/optimizer_trainer.h"

#include "daemon/federation/deadlines.h"

namespace meridian::daemon::algorithms {
namespace {

models::OptimizerConfig optimizer_of(const SiteSettings& settings) {
  models::OptimizerConfig o;
  o.kind = settings.optimizer;
  o.momentum = static_cast<float>(settings.options.momentum);
  o.weight_decay = static_cast<float>(settings.options.weight_decay);
  return o;
}

}  // namespace

std::chrono::milliseconds mix_wait_timeout(const SiteSettings& settings) {
  // With --round-timeout auto a round may take up to the rule's cap: a healthy slow federation must not
  // look like a hung communication thread.
  const auto round = settings.options.round_timeout == kAutoDeadline
                         ? std::chrono::duration_cast<std::chrono::milliseconds>(round_deadline_rule().cap)
                         : round_timeout_bound(settings.options);
  return round * 3 + std::chrono::seconds(60);
}

void check_checkpoint_size(std::size_t got, std::size_t want, const std::string& what) {
  if (got != want) {
    throw CheckpointError("checkpoint " + what + " holds " + std::to_string(got) + " values, this model needs " +
                          std::to_string(want));
  }
}

OptimizerTrainer::OptimizerTrainer(const TrainerContext& context)
    : model_(context.model),
      mirror_(context.model),
      optimizer_(optimizer_of(context.settings), context.schedule, context.model.parameters().size(), context.backend) {
}

std::span<const float> OptimizerTrainer::checkpoint_parameters() const {
  mirror_.pull_parameters();
  return mirror_.parameters();
}

std::vector<OptimizerSpan> OptimizerTrainer::checkpoint_state() const {
  if (optimizer_.state().empty()) return {};
  if (!mirror_.mirrored()) return {OptimizerSpan{"optimizer", optimizer_.state()}};
  state_copy_.resize(optimizer_.state().size());
  optimizer_.read_state(state_copy_);
  return {OptimizerSpan{"optimizer", state_copy_}};
}

void OptimizerTrainer::restore(const Checkpoint& cp) {
  check_checkpoint_size(cp.parameters.size(), model_.parameters().size(), "parameters");
  model_.write_parameters(cp.parameters);
  mirror_.pull_parameters();
  restore_state(cp);
}

void OptimizerTrainer::restore_state(const Checkpoint& cp) {
  if (optimizer_.state().empty()) return;
  const auto* state = cp.find_optimizer_state("optimizer");
  if (state == nullptr) throw CheckpointError("checkpoint has no optimizer state for --optimizer");
  check_checkpoint_size(state->size(), optimizer_.state().size(), "optimizer state");
  optimizer_.write_state(*state);
}

std::span<float> OptimizerTrainer::host_state() {
  if (!mirror_.mirrored()) return optimizer_.state();
  state_copy_.resize(optimizer_.state().size());
  optimizer_.read_state(state_copy_);
  return state_copy_;
}

void OptimizerTrainer::optimizer_step(std::uint64_t local_step) {
  optimizer_.set_step_count(local_step);  // the same rate on every site, also after a rejoin
  optimizer_.step(model_.parameters(), model_.gradients(), model_.pool());
}

}  // namespace meridian::daemon::algorithms
