#include "daemon/attached_trainer.h"

#include <algorithm>
#include <utility>

#include "daemon/algorithms/diloco.h"
#include "daemon/algorithms/optimizer_trainer.h"
#include "daemon/algorithms/registry.h"
#include "gossip/diloco.h"
#include "gossip/synchronous_average.h"

namespace meridian::daemon {
namespace {

using algorithms::check_checkpoint_size;
using algorithms::mix_wait_timeout;

class AttachedLocal final : public AttachedTrainer {
 public:
  explicit AttachedLocal(const AttachedContext& context) : AttachedTrainer(context) {}
  void step(std::uint64_t, std::uint64_t) override {}
};

class AttachedAllReduce final : public AttachedTrainer {
 public:
  explicit AttachedAllReduce(const AttachedContext& context)
      : AttachedTrainer(context),
        gradients_(context.gradients),
        channel_(context.channel),
        pull_(context.pull),
        timeout_(mix_wait_timeout(context.settings)) {}

  void step(std::uint64_t k, std::uint64_t) override {
    const auto report = gossip::average_now(channel_, k, gradients_, timeout_);
    abandoned_ += report.abandoned;
    changes_.gradients = true;
    // Every site sees the view change at the same round, so they all re-average here together, and
    // the ring's all-gather leaves every site the same bits (a site back from a checkpoint included).
    // The parameters are those before this step's update; the averaged gradient then moves every
    // replica alike. The trainer's optimizer state is its own and is not re-averaged.
    if (!have_view_ || report.view_id != view_id_) {
      pull_();
      const auto again = gossip::average_now(channel_, k, parameters_, timeout_, gossip::RoundTag::kReaverage);
      abandoned_ += again.abandoned;
      changes_.parameters = true;
    }
    have_view_ = true;
    view_id_ = report.view_id;
  }
  std::uint64_t rounds_abandoned() const override { return abandoned_; }

 private:
  std::span<float> gradients_;
  gossip::MixChannel& channel_;
  std::function<void()> pull_;
  std::chrono::milliseconds timeout_;
  bool have_view_ = false;
  std::uint64_t view_id_ = 0;
  std::uint64_t abandoned_ = 0;
};

class AttachedDiloco final : public AttachedTrainer {
 public:
  explicit AttachedDiloco(const AttachedContext& context)
      : AttachedTrainer(context),
        pull_(context.pull),
        diloco_(algorithms::diloco_config_of(context.settings), context.channel, context.parameters) {}

  void step(std::uint64_t k, std::uint64_t) override {
    // The parameters cross only at the steps whose sync or exchange reads them: every H/F steps.
    if (!diloco_.touches_parameters(k)) {
      diloco_.after_step(k);
      return;
    }
    pull_();
    diloco_.after_step(k);
    changes_.parameters = true;
  }
  void finish() override {
    pull_();
    diloco_.finish();
    changes_.parameters = true;
  }
  std::uint64_t staleness() const override { return diloco_.in_flight(); }
  std::uint64_t rounds_abandoned() const override { return diloco_.abandoned_rounds(); }
  std::vector<OptimizerSpan> checkpoint_state() const override {
    return algorithms::outer_state_sections(diloco_);
  }
  void restore(const Checkpoint& cp) override {
    AttachedTrainer::restore(cp);
    algorithms::restore_outer_state(cp, diloco_);
  }

 private:
  std::function<void()> pull_;
  gossip::Diloco diloco_;
};

// The algorithms that run attached, each with its trainer side above.
struct Supported {
  gossip::Algorithm id;
  TrainerHook hook;
  std::unique_ptr<AttachedTrainer> (*make)(const AttachedContext&);
};
template <typename T>
std::unique_ptr<AttachedTrainer> make(const AttachedContext& context) {
  return std::make_unique<T>(context);
}
constexpr Supported kSupported[] = {
    {gossip::Algorithm::kAllReduce, TrainerHook::kGradients, make<AttachedAllReduce>},
    {gossip::Algorithm::kLocal, TrainerHook::kParameters, make<AttachedLocal>},
    {gossip::Algorithm::kDiloco, TrainerHook::kParameters, make<AttachedDiloco>},
};

const Supported* supported(gossip::Algorithm id) {
  for (const auto& s : kSupported)
    if (s.id == id) return &s;
  return nullptr;
}

}  // namespace

void AttachedTrainer::restore(const Checkpoint& cp) {
  check_checkpoint_size(cp.parameters.size(), parameters_.size(), "parameters");
  std::copy(cp.parameters.begin(), cp.parameters.end(), parameters_.begin());
}

std::vector<std::string> attached_algorithm_names() {
  std::vector<std::string> names;
  for (const auto* algorithm : algorithms::all_algorithms())
    if (supported(algorithm->id()) != nullptr) names.emplace_back(algorithm->name());
  return names;
}

std::string attached_support_problem(const SiteSettings& settings) {
  if (supported(settings.algo) != nullptr) return "";
  std::string names;
  for (const auto& name : attached_algorithm_names()) names += (names.empty() ? "" : ", ") + name;
  return "--algo " + std::string(algorithms::algorithm_for(settings.algo).name()) +
         " does not run with --trainer attached yet; attached sites run " + names;
}

TrainerHook attached_hook(const SiteSettings& settings) {
  const auto* s = supported(settings.algo);
  if (s == nullptr) throw error::InternalError(attached_support_problem(settings));
  return s->hook;
}

std::unique_ptr<AttachedTrainer> make_attached_trainer(const AttachedContext& context) {
  const auto* s = supported(context.settings.algo);
  if (s == nullptr) throw error::InternalError(attached_support_problem(context.settings));
  return s->make(context);
}

}  // namespace meridian::daemon
