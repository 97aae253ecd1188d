#include "daemon/algorithms/dsync.h"

#include <functional>

#include "daemon/algorithms/optimizer_trainer.h"
#include "daemon/backend/async_parameter_copy.h"
#include "daemon/backend/backend_parameters.h"
#include "gossip/delayed_mixing.h"
#include "gossip/group_mixer.h"
#include "privacy/secure_mean_mixer.h"

namespace meridian::daemon::algorithms {
namespace {

gossip::DelayedMixingConfig mixing_of(const SiteSettings& settings) {
  const auto delay = static_cast<std::uint32_t>(settings.options.delay);
  return gossip::DelayedMixingConfig{delay,
                                     false,
                                     gossip::stable_mix_step(delay),
                                     static_cast<std::uint64_t>(settings.options.reaverage_every),
                                     true,
                                     mix_wait_timeout(settings)};
}

class DsyncTrainer final : public OptimizerTrainer {
 public:
  explicit DsyncTrainer(const TrainerContext& context)
      : OptimizerTrainer(context),
        store_(parameter_store(context.model)),
        // The normalization statistics travel with the parameters (after them in every snapshot and
        // re-average) and are compensated the same way: DS-Sync averages the model's buffers too.
        mixing_(mixing_of(context.settings), context.channel, *store_, mirror_.state()) {}

  void step(std::uint64_t k, std::uint64_t local_step) override {
    // On a GPU with D > 0, step k − 1's snapshot was copied while this step's forward and backward pass
    // ran; it is handed over before the optimizer writes the parameters. Nothing to do on the CPU.
    mixing_.before_update();
    optimizer_step(local_step);
    // On a device the statistics come down for the mix and go back up with what it applied (a copy of
    // a few floats per channel; nothing for a model without them, and nothing on the CPU).
    mirror_.pull_state();
    mixing_.after_step(k);
    mirror_.push_state();
  }
  void finish() override {
    mirror_.pull_state();
    mixing_.finish();
    mirror_.push_state();
  }
  std::uint64_t staleness() const override { return mixing_.in_flight(); }
  std::uint64_t rounds_abandoned() const override { return mixing_.abandoned_rounds(); }

 private:
  // The model's own host buffer on the CPU; on a device the parameters stay there, the snapshot is read
  // from it and the delayed compensation runs on it (daemon/backend/backend_parameters.h).
  static std::unique_ptr<gossip::ParameterStore> parameter_store(models::Model& model) {
    if (model.backend().host_addressable()) return std::make_unique<gossip::HostParameters>(model.parameters());
    return std::make_unique<BackendParameters>(model.backend(), model.parameters(),
                                               make_async_parameter_copy(model.backend(), model.parameter_count()));
  }

  std::unique_ptr<gossip::ParameterStore> store_;
  gossip::DelayedMixing mixing_;
};

// The attached trainer side (daemon/attached/attached_trainer.h): after the trainer's optimizer step the
// parameters are pulled, and the group mean with its delayed compensation runs on them in the
// segment, as DsyncTrainer does on the model.
class AttachedDsyncTrainer final : public AttachedTrainer {
 public:
  explicit AttachedDsyncTrainer(const AttachedContext& context)
      : AttachedTrainer(context),
        pull_(context.pull),
        mixing_(mixing_of(context.settings), context.channel, context.parameters) {}

  void step(std::uint64_t k, std::uint64_t) override {
    pull_();
    mixing_.after_step(k);
    changes_.parameters = true;
  }
  void finish() override {
    mixing_.finish();
    changes_.parameters = true;
  }
  std::uint64_t staleness() const override { return mixing_.in_flight(); }
  std::uint64_t rounds_abandoned() const override { return mixing_.abandoned_rounds(); }

 private:
  std::function<void()> pull_;
  gossip::DelayedMixing mixing_;
};

class Dsync final : public Algorithm {
 public:
  std::string_view name() const override { return "dsync"; }
  void check(const SiteSettings& s, std::vector<std::string>& problems) const override {
    if (delay_is_auto(s))
      problems.push_back("--delay: dsync takes a whole number of steps (auto chooses dts' shape only)");
  }
  bool reads(std::string_view option) const override {
    return option == "delay" || option == "grid" || option == "reaverage-every";
  }
  std::string describe_knobs(const SiteSettings& s) const override {
    return "grid " + s.options.grid + ", D = " + std::to_string(s.options.delay);
  }
  // Every mix and re-average carries the parameters, then the normalization statistics.
  WireLimits wire_limits(const SiteSettings&) const override { return {true, 1, true}; }
  BufferSizes buffer_sizes(const SiteSettings&, std::size_t parameters) const override {
    return {parameters, parameters};
  }
  bool takes_exact_means() const override { return true; }
  MixerSet make_mixers(const MixerContext& c) const override {
    MixerSet set;
    if (c.pair_keys != nullptr) {
      // The masked mean within the step's group; a group that cannot finish keeps its values, as below.
      const gossip::GridSpec grid = c.settings.grid;
      auto group_of = [grid](const peer::View& view, std::size_t rank, std::uint64_t step) {
        std::vector<std::string> members;
        for (std::size_t r : gossip::group_at(gossip::group_grid_for(view.size(), grid), rank, step))
          members.push_back(view.at(r));
        return members;
      };
      set.owned =
          std::make_unique<privacy::SecureMeanMixer>(c.inbox, *c.pair_keys, *c.secure_counters, c.timeouts, group_of,
                                                     privacy::kGroupDomain, privacy::SecureMeanMixer::Abandon::kSkip);
      set.mix = set.owned.get();
      return set;
    }
    set.owned = std::make_unique<gossip::GroupMixer>(c.inbox, c.timeouts, c.robust, c.settings.grid);
    set.mix = set.owned.get();
    return set;
  }
  std::unique_ptr<TrainerAlgorithm> make_trainer(const TrainerContext& context) const override {
    return std::make_unique<DsyncTrainer>(context);
  }
  std::optional<TrainerHook> attached_hook() const override { return TrainerHook::kParameters; }
  std::unique_ptr<AttachedTrainer> make_attached_trainer(const AttachedContext& context) const override {
    return std::make_unique<AttachedDsyncTrainer>(context);
  }
};

}  // namespace

const Algorithm& dsync_algorithm() {
  static const Dsync algorithm;
  return algorithm;
}

}  // namespace meridian::daemon::algorithms
