#include "daemon/algorithms/sgp.h"

#include <functional>

#include "daemon/algorithms/optimizer_trainer.h"
#include "daemon/backend/backend_push_sum.h"
#include "gossip/delayed_mixing.h"
#include "gossip/osgp_split.h"
#include "gossip/push_sum.h"
#include "gossip/push_sum_mixer.h"

namespace meridian::daemon::algorithms {
namespace {

// --tau auto: τ follows the view's pace (daemon/algorithms/auto_shape.h); until it is measured, τ = 1.
bool auto_tau(const SiteSettings& s) { return s.options.tau == kAutoShape; }
constexpr std::uint32_t kFallbackTau = 1;
std::uint32_t fixed_tau(const SiteSettings& s) {
  return auto_tau(s) ? kFallbackTau : static_cast<std::uint32_t>(s.options.tau);
}
std::uint32_t tau_of(const peer::View& view) { return choose_sgp_tau(view.pace, kFallbackTau); }

// τ chosen for `view` as the trainer records it. Only the mixer's staleness bound τ − 1 and the step
// scale's gain follow τ: the trainer's own delay is 1 for every τ >= 1 (gossip/osgp_split.h), so a
// change needs no draining.
class AutoTau {
 public:
  explicit AutoTau(const SiteSettings& s)
      : enabled_(auto_tau(s)), out_peers_(static_cast<std::size_t>(s.options.out_peers)) {}
  // Returns true when τ changed at round k: the caller's step scale takes the new mixer staleness.
  bool adopt(std::uint64_t k, const peer::View& view, gossip::PushSumStepScale& scale) {
    if (!enabled_ || (shape_ && shape_->view_id == view.id)) return false;
    const std::uint32_t tau = tau_of(view);
    const bool changed = !shape_ || shape_->tau != tau;
    if (changed) scale.set_mixer_staleness(gossip::osgp_split(tau).mixer_staleness, out_peers_);
    shape_ =
        ChosenShape{"tau = " + std::to_string(tau), 0, 0, tau, view.pace, view.id, changed ? k : shape_->from_round};
    return changed;
  }
  const std::optional<ChosenShape>& shape() const { return shape_; }

 private:
  bool enabled_;
  std::size_t out_peers_;
  std::optional<ChosenShape> shape_;
};

// sgp's mixing: overlap (τ split with the mixer, gossip/osgp_split.h), no re-averaging (numerators have
// no meaningful exact mean).
gossip::DelayedMixingConfig sgp_mixing(const SiteSettings& settings) {
  const auto split = gossip::osgp_split(fixed_tau(settings));
  return gossip::DelayedMixingConfig{split.delay, true,  gossip::stable_mix_step(split.delay),
                                     0,           false, mix_wait_timeout(settings)};
}

// The factor of sgp's update: a gain only where the mixer leaves shares in flight (τ ≥ 2).
gossip::PushSumStepScale sgp_step_scale(const SiteSettings& settings) {
  const auto split = gossip::osgp_split(fixed_tau(settings));
  return gossip::PushSumStepScale(split.mixer_staleness, static_cast<std::size_t>(settings.options.out_peers));
}

class SgpTrainer final : public OptimizerTrainer {
 public:
  explicit SgpTrainer(const TrainerContext& context)
      : OptimizerTrainer(context),
        push_sum_(sgp_mixing(context.settings), context.channel, mirror_.parameters(),
                  sgp_step_scale(context.settings)),
        auto_tau_(context.settings) {}

  void adopt_view(std::uint64_t k, const peer::View& view) override {
    auto_tau_.adopt(k, view, push_sum_.step_scale());
  }
  std::optional<ChosenShape> chosen_shape() const override { return auto_tau_.shape(); }

  void step(std::uint64_t k, std::uint64_t local_step) override {
    // The optimizer runs on z (the model); its displacement z_before − z_after is the update that
    // push-sum applies to the numerator (momentum stays local, as in the paper). z_before is what
    // push-sum wrote into the model last, which it recomputes from x and w rather than keeping a copy.
    optimizer_step(local_step);
    mirror_.pull_parameters();
    push_sum_.step_in_place(k);
    mirror_.push_parameters();
  }
  void finish() override {
    push_sum_.finish();
    mirror_.push_parameters();
  }
  std::uint64_t staleness() const override { return push_sum_.mixing().in_flight(); }
  std::uint64_t rounds_abandoned() const override { return push_sum_.mixing().abandoned_rounds(); }
  std::span<const float> checkpoint_parameters() const override { return push_sum_.numerator(); }
  double push_sum_weight() const override { return push_sum_.weight(); }
  double push_sum_weight_average() const override { return push_sum_.weight_average(); }
  void restore(const Checkpoint& cp) override {
    check_checkpoint_size(cp.parameters.size(), model_.parameters().size(), "parameters");
    push_sum_.restore(cp.parameters, cp.push_sum_weight, cp.push_sum_weight_average);
    mirror_.push_parameters();
    restore_state(cp);
  }

 private:
  gossip::PushSum push_sum_;
  AutoTau auto_tau_;
};

// The attached trainer side (daemon/attached/attached_trainer.h): the trainer's optimizer steps on z, the
// de-biased model in the segment; after its step the parameters are pulled and push-sum takes the
// displacement into the numerator, mixes, and writes the new z back, as SgpTrainer does on the model.
class AttachedSgpTrainer final : public AttachedTrainer {
 public:
  explicit AttachedSgpTrainer(const AttachedContext& context)
      : AttachedTrainer(context),
        pull_(context.pull),
        push_sum_(sgp_mixing(context.settings), context.channel, context.parameters, sgp_step_scale(context.settings)),
        auto_tau_(context.settings) {}

  void adopt_view(std::uint64_t k, const peer::View& view) override {
    auto_tau_.adopt(k, view, push_sum_.step_scale());
  }
  std::optional<ChosenShape> chosen_shape() const override { return auto_tau_.shape(); }
  void step(std::uint64_t k, std::uint64_t) override {
    // step_in_place's z_before is x / w recomputed, bit for bit what the trainer copied out last
    // (a float32 model copies it exactly).
    pull_();
    push_sum_.step_in_place(k);
    changes_.parameters = true;
  }
  void finish() override {
    push_sum_.finish();
    changes_.parameters = true;
  }
  std::uint64_t staleness() const override { return push_sum_.mixing().in_flight(); }
  std::uint64_t rounds_abandoned() const override { return push_sum_.mixing().abandoned_rounds(); }
  std::span<const float> checkpoint_parameters() const override { return push_sum_.numerator(); }
  double push_sum_weight() const override { return push_sum_.weight(); }
  double push_sum_weight_average() const override { return push_sum_.weight_average(); }
  void restore(const Checkpoint& cp) override {
    check_checkpoint_size(cp.parameters.size(), parameters_.size(), "parameters");
    push_sum_.restore(cp.parameters, cp.push_sum_weight, cp.push_sum_weight_average);
  }

 private:
  std::function<void()> pull_;
  gossip::PushSum push_sum_;
  AutoTau auto_tau_;
};

// sgp on a device backend: the numerator, the optimizer's displacement and the push-sum arithmetic stay
// in device memory (daemon/backend/backend_push_sum.h); only the mixing snapshot and its result cross the bus.
class SgpOnDeviceTrainer final : public OptimizerTrainer {
 public:
  explicit SgpOnDeviceTrainer(const TrainerContext& context)
      : OptimizerTrainer(context),
        push_sum_(sgp_mixing(context.settings), context.channel, context.model, sgp_step_scale(context.settings)),
        before_(context.model.backend(), context.model.parameter_count()),
        auto_tau_(context.settings) {}

  void adopt_view(std::uint64_t k, const peer::View& view) override {
    auto_tau_.adopt(k, view, push_sum_.step_scale());
  }
  std::optional<ChosenShape> chosen_shape() const override { return auto_tau_.shape(); }

  void step(std::uint64_t k, std::uint64_t local_step) override {
    // Step k − 1's snapshot of x was copied while this step's forward and backward pass ran; it is
    // handed over before anything below writes x.
    push_sum_.before_update();
    model_.backend().copy(before_.data(), model_.parameters().data(), before_.size() * sizeof(float));
    optimizer_step(local_step);
    push_sum_.step(k, before_.data());
  }
  void finish() override { push_sum_.finish(); }
  std::uint64_t staleness() const override { return push_sum_.mixing().in_flight(); }
  std::uint64_t rounds_abandoned() const override { return push_sum_.mixing().abandoned_rounds(); }
  std::span<const float> checkpoint_parameters() const override { return push_sum_.numerator(); }
  double push_sum_weight() const override { return push_sum_.weight(); }
  double push_sum_weight_average() const override { return push_sum_.weight_average(); }
  void restore(const Checkpoint& cp) override {
    check_checkpoint_size(cp.parameters.size(), model_.parameters().size(), "parameters");
    push_sum_.restore(cp.parameters, cp.push_sum_weight, cp.push_sum_weight_average);
    restore_state(cp);
  }

 private:
  mutable BackendPushSum push_sum_;
  models::BackendBuffer<float> before_;  // (n) z before the optimizer step, backend memory
  AutoTau auto_tau_;
};

class Sgp final : public Algorithm {
 public:
  std::string_view name() const override { return "sgp"; }
  void check(const SiteSettings& s, std::vector<std::string>& problems) const override {
    if (s.options.delay != 0) {
      problems.push_back("--delay: sgp overlaps its mixing by --tau steps; --delay applies to dts and dsync only");
    }
  }
  bool reads(std::string_view option) const override {
    return option == "out-peers" || option == "tau" || option == "compression";
  }
  // Push-sum receivers decode fp16 shares only (gossip/push_sum_mixer.h).
  bool accepts(gossip::Encoding encoding) const override {
    return encoding == gossip::Encoding::kDense || encoding == gossip::Encoding::kFp16;
  }
  std::string describe_knobs(const SiteSettings& s) const override {
    std::string out = "K = " + std::to_string(s.options.out_peers) + " out-peer(s), tau = " +
                      (auto_tau(s) ? std::string("auto (chosen from the network)") : std::to_string(s.options.tau));
    if (s.compression.encoding != gossip::Encoding::kDense) out += ", compression " + s.options.compression;
    return out;
  }
  bool shape_from_network(const SiteSettings& s) const override { return auto_tau(s); }
  // Push-sum does not wait for anyone: a returning site joins at the round its peers mix.
  bool peers_wait_for_rejoin() const override { return false; }
  WireLimits wire_limits(const SiteSettings&) const override { return {}; }
  BufferSizes buffer_sizes(const SiteSettings&, std::size_t parameters) const override {
    return {parameters, parameters};
  }
  MixerSet make_mixers(const MixerContext& c) const override {
    MixerSet set;
    auto mixer = std::make_unique<gossip::PushSumMixer>(c.inbox, static_cast<std::size_t>(c.settings.options.out_peers),
                                                        c.timeouts, c.robust, c.settings.compression,
                                                        gossip::osgp_split(fixed_tau(c.settings)).mixer_staleness);
    if (auto_tau(c.settings))
      mixer->set_staleness_from_view(
          [](const peer::View& view) { return gossip::osgp_split(tau_of(view)).mixer_staleness; });
    set.owned = std::move(mixer);
    set.mix = set.owned.get();
    return set;
  }
  std::unique_ptr<TrainerAlgorithm> make_trainer(const TrainerContext& context) const override {
    if (!context.model.backend().host_addressable()) return std::make_unique<SgpOnDeviceTrainer>(context);
    return std::make_unique<SgpTrainer>(context);
  }
  std::optional<TrainerHook> attached_hook() const override { return TrainerHook::kParameters; }
  std::unique_ptr<AttachedTrainer> make_attached_trainer(const AttachedContext& context) const override {
    return std::make_unique<AttachedSgpTrainer>(context);
  }
};

}  // namespace

const Algorithm& sgp_algorithm() {
  static const Sgp algorithm;
  return algorithm;
}

}  // namespace meridian::daemon::algorithms
