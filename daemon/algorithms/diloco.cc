#include "daemon/algorithms/diloco.h"

#include <algorithm>
#include <limits>
#include <array>
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <utility>

#include <spdlog/spdlog.h>

#include "daemon/algorithms/optimizer_trainer.h"
#include "gossip/diloco.h"

namespace meridian::daemon::algorithms {
namespace {

constexpr const char* kGlobalSection = "diloco-global";
constexpr const char* kMomentumSection = "diloco-outer-momentum";
constexpr const char* kWeightSection = "diloco-push-sum-weight";  // diloco-gossip only
constexpr const char* kResidualSection = "diloco-residuals";

// diloco's own options, the first two read by diloco-gossip too. --fragments' and --overlap's ranges
// depend on --inner-steps, so check() judges them.
constexpr AlgorithmOption kInnerSteps{
    .name = "inner-steps",
    .help = "H: diloco's and diloco-gossip's inner steps between outer syncs",
    .brief = "H (diloco, diloco-gossip: inner steps between outer syncs)",
    .default_value = kDilocoDefaultInnerSteps,
    .range = [](const OptionValue& value) -> std::string {
      return std::get<int>(value) >= 1 ? "" : "must be at least 1 (e.g. 32)";
    },
};
constexpr AlgorithmOption kOverlap{
    .name = "overlap",
    .help =
        "τ: inner steps that run while an outer exchange of diloco or diloco-gossip travels, applied with "
        "delayed compensation (at most --inner-steps), or auto: chosen from the measured round trip and step "
        "time (docs/algorithms.md). diloco runs auto, diloco-gossip 2 unless it is given",
    .brief = "τ (diloco, diloco-gossip: overlap), or auto: chosen from the measured network",
    .default_value = kAutoOptionValue,
    .range = [](const OptionValue& value) -> std::string {
      const int overlap = std::get<int>(value);
      return overlap >= 0 || overlap == kAutoOptionValue ? "" : "must be a whole number >= 0 or auto (e.g. 2)";
    },
    .takes_auto = true,
};
constexpr AlgorithmOption kFragments{
    .name = "fragments",
    .help = "F: diloco syncs the parameters in F fragments, each every --inner-steps steps, H/F steps apart",
    .brief = "F (diloco: fragments synced H/F steps apart)",
    .default_value = 1,
};
constexpr AlgorithmOption kOuterLr{
    .name = "outer-lr",
    .help = "diloco, diloco-gossip: outer learning rate (FedAvg: 1)",
    .brief = "diloco, diloco-gossip: outer learning rate",
    .default_value = 0.7,
    .range = [](const OptionValue& value) -> std::string {
      const double lr = std::get<double>(value);
      return std::isfinite(lr) && lr > 0 ? "" : "must be positive (e.g. 0.7)";
    },
};
constexpr AlgorithmOption kOuterMomentum{
    .name = "outer-momentum",
    .help = "diloco, diloco-gossip: outer Nesterov momentum, in [0, 1) (FedAvg: 0)",
    .brief = "diloco, diloco-gossip: outer Nesterov momentum",
    .default_value = 0.9,
    .range = [](const OptionValue& value) -> std::string {
      const double momentum = std::get<double>(value);
      return momentum >= 0 && momentum < 1 ? "" : "must be in [0, 1) (e.g. 0.9)";
    },
};
constexpr std::array<const AlgorithmOption*, 5> kOptions{&kInnerSteps, &kOverlap, &kFragments, &kOuterLr,
                                                         &kOuterMomentum};

int fragments_of(const SiteSettings& s) { return s.options.algorithm_options.whole(kFragments); }

// The overlap before any measured pace: the fixed default, within H.
std::uint32_t fallback_overlap(const SiteSettings& s) {
  return static_cast<std::uint32_t>(std::min(kDilocoDefaultOverlap, inner_steps_of(s)));
}

}  // namespace

int inner_steps_of(const SiteSettings& s) { return s.options.algorithm_options.whole(kInnerSteps); }
int overlap_of(const SiteSettings& s) { return s.options.algorithm_options.whole(kOverlap); }
bool overlap_is_auto(const SiteSettings& s) { return overlap_of(s) == kAutoOptionValue; }

std::uint64_t diloco_view_change_reach(const SiteSettings& s) {
  const auto inner_steps = static_cast<std::uint64_t>(std::max(inner_steps_of(s), 0));
  // An automatic overlap stays within H.
  if (overlap_is_auto(s)) return 2 * inner_steps;
  return static_cast<std::uint64_t>(std::max(overlap_of(s), 0)) + inner_steps;
}

void adopt_renamed_shape_options(SiteConfig& config, const OptionGiven& given) {
  const SiteConfig defaults;
  constexpr std::string_view readers = "diloco and diloco-gossip";
  // Only a value other than the default: a file that lists every key (simulate's, `meridian init`'s
  // of an older release) holds them at their defaults, and those mean nothing here.
  if (given("period") && config.period != defaults.period) {
    warn_renamed_option("period", kInnerSteps, readers);
    if (!given(kInnerSteps.name)) config.algorithm_options.set(kInnerSteps, config.period);
    config.period = defaults.period;
  }
  if (given("delay") && config.delay != defaults.delay) {
    warn_renamed_option("delay", kOverlap, readers);
    if (!given(kOverlap.name)) config.algorithm_options.set(kOverlap, config.delay);
    config.delay = defaults.delay;
  }
}

gossip::DilocoConfig diloco_config_of(const SiteSettings& s) {
  gossip::DilocoConfig config;
  config.inner_steps = static_cast<std::uint32_t>(inner_steps_of(s));
  config.outer_lr = s.options.algorithm_options.real(kOuterLr);
  config.outer_momentum = s.options.algorithm_options.real(kOuterMomentum);
  config.overlap = overlap_is_auto(s) ? fallback_overlap(s) : static_cast<std::uint32_t>(overlap_of(s));
  config.fragments = static_cast<std::uint32_t>(fragments_of(s));
  config.wire = s.compression;
  config.wait_timeout = mix_wait_timeout(s);
  return config;
}

namespace {

// What every trainer side of diloco and diloco-gossip shares, built-in or attached: gossip::Diloco on
// the parameters it is given, the overlap chosen from the network (--overlap auto), and the checkpoint
// sections of the outer state.
class DilocoRule {
 public:
  DilocoRule(const SiteSettings& settings, const gossip::DilocoConfig& config, gossip::MixChannel& channel,
             std::span<float> parameters, std::span<float> state)
      : wire_(config.wire),
        auto_(overlap_is_auto(settings)),
        // A push-sum share (diloco-gossip) makes one crossing whatever the view's size.
        direct_max_sites_(config.outer_average == gossip::OuterAverage::kPushSum
                              ? std::numeric_limits<std::size_t>::max()
                              : direct_exchange_max_sites(settings)),
        fallback_(fallback_overlap(settings)),
        diloco_(config, channel, parameters, state) {}

  gossip::Diloco& diloco() { return diloco_; }
  const gossip::Diloco& diloco() const { return diloco_; }

  void adopt_view(std::uint64_t k, const peer::View& view) {
    if (!auto_ || (shape_ && shape_->view_id == view.id)) return;
    // Exchanges in flight keep the overlap they started with (gossip/diloco.h); syncs from round k
    // on take the new one.
    const bool direct = view.size() <= direct_max_sites_;
    const std::uint32_t tau = algorithms::choose_diloco_overlap(view.pace, exchange_crossings(view.size(), direct),
                                                                diloco_.fragments().inner_steps(), fallback_);
    // With --exchange auto the path follows the view's size too: the shape names it, so that the log
    // line of a switch and `status` say which one the syncs take.
    std::string text = "overlap τ = " + std::to_string(tau);
    if (direct_max_sites_ == kAutoDirectMaxSites) text += direct ? " over the direct exchange" : " over the ring";
    const bool changed = !shape_ || shape_->text != text;
    diloco_.set_overlap(tau);
    shape_ = ChosenShape{std::move(text), tau, 0, 0, view.pace, view.id, changed ? k : shape_->from_round};
  }
  const std::optional<ChosenShape>& chosen_shape() const { return shape_; }

  // The outer state's sections, after `sections` (the trainer's own).
  std::vector<OptimizerSpan> checkpoint_state(std::vector<OptimizerSpan> sections) const {
    for (auto& section : outer_state_sections(diloco_)) sections.push_back(std::move(section));
    if (diloco_.outer_average() == gossip::OuterAverage::kPushSum) {
      weight_[0] = static_cast<float>(diloco_.push_sum_weight());
      sections.push_back(OptimizerSpan{kWeightSection, weight_});
    }
    if (diloco_.holds_residuals()) {
      residuals_.resize(diloco_.global_parameters().size());
      diloco_.read_residuals(residuals_);
      sections.push_back(OptimizerSpan{kResidualSection, residuals_});
    }
    return sections;
  }
  void restore(const Checkpoint& cp) {
    restore_outer_state(cp, diloco_);
    if (const auto* weight = cp.find_optimizer_state(kWeightSection); weight != nullptr) {
      check_checkpoint_size(weight->size(), 1, kWeightSection);
      diloco_.set_push_sum_weight((*weight)[0]);
    }
    restore_residuals(cp);
  }

 private:
  // The residuals are optional in a checkpoint: one written before checkpoints kept them, or by a run
  // on a dense wire, has none, and they start at zero; that costs at most one sync's rounding, which
  // error feedback would otherwise have sent later. A section of another length is refused: its values
  // cannot be matched to this model's elements.
  void restore_residuals(const Checkpoint& cp) {
    const auto* section = cp.find_optimizer_state(kResidualSection);
    if (!diloco_.holds_residuals()) {
      if (section != nullptr)
        spdlog::info(
            "diloco: the checkpoint's error-feedback residuals are not used: this run sends fp32 "
            "pseudo-gradients, which keep none");
      return;
    }
    if (section == nullptr) {
      spdlog::warn(
          "diloco: the checkpoint holds no error-feedback residuals (written before checkpoints kept them, "
          "or by a run with an fp32 wire): they start at zero");
      return;
    }
    check_checkpoint_size(section->size(), diloco_.global_parameters().size(),
                          std::string("section '") + kResidualSection + "' (diloco's error-feedback residuals)");
    diloco_.write_residuals(*section);
    spdlog::info("diloco: restored the error-feedback residuals of the {} wire from the checkpoint",
                 gossip::diloco_wire_name(wire_));
  }

  gossip::CompressionSpec wire_;
  const bool auto_;                     // --overlap auto: the overlap follows the view's pace
  const std::size_t direct_max_sites_;  // views up to this size sync in one crossing (else the ring's 2(n − 1))
  const std::uint32_t fallback_;        // the overlap while the pace is not measured
  std::optional<ChosenShape> shape_;    // the shape in force, with --overlap auto
  gossip::Diloco diloco_;
  // w as the checkpoint's section: θ_g is saved de-biased, so w only weighs this site's later shares and
  // float suffices. Not the checkpoint's push-sum weight, by which `eval` divides the parameters (sgp's
  // numerator); θ is no numerator.
  mutable std::array<float, 1> weight_{};
  mutable std::vector<float> residuals_;  // (n) the residuals a checkpoint writes, read at checkpoint_state()
};

class DilocoTrainer final : public OptimizerTrainer {
 public:
  DilocoTrainer(const TrainerContext& context, const gossip::DilocoConfig& config)
      : OptimizerTrainer(context),
        rule_(context.settings, config, context.channel, mirror_.parameters(), mirror_.state()),
        diloco_(rule_.diloco()) {}

  void adopt_view(std::uint64_t k, const peer::View& view) override { rule_.adopt_view(k, view); }
  std::optional<ChosenShape> chosen_shape() const override { return rule_.chosen_shape(); }

  void step(std::uint64_t k, std::uint64_t local_step) override {
    optimizer_step(local_step);
    // On a device the parameters come down and go back up only at the steps that sync or apply an
    // exchange: every H/F steps, not every step.
    const bool touches = diloco_.touches_parameters(k);
    if (touches) {
      mirror_.pull_parameters();
      mirror_.pull_state();  // a re-average after a view change carries the normalization statistics
    }
    diloco_.after_step(k);
    if (touches) {
      mirror_.push_parameters();
      mirror_.push_state();
    }
  }
  void finish() override {
    mirror_.pull_parameters();
    diloco_.finish();
    mirror_.push_parameters();
  }
  std::uint64_t staleness() const override { return diloco_.in_flight(); }
  std::uint64_t rounds_abandoned() const override { return diloco_.abandoned_rounds(); }
  std::vector<OptimizerSpan> checkpoint_state() const override {
    return rule_.checkpoint_state(OptimizerTrainer::checkpoint_state());
  }
  void restore(const Checkpoint& cp) override {
    OptimizerTrainer::restore(cp);
    rule_.restore(cp);
  }

 private:
  DilocoRule rule_;
  gossip::Diloco& diloco_;
};

// The attached trainer side (daemon/attached/attached_trainer.h): the trainer's optimizer is the inner one; the
// parameters cross only at the steps whose sync or exchange reads them (every H/F steps), and the
// outer step runs on them in the segment.
class AttachedDilocoTrainer final : public AttachedTrainer {
 public:
  AttachedDilocoTrainer(const AttachedContext& context, const gossip::DilocoConfig& config)
      : AttachedTrainer(context),
        pull_(context.pull),
        rule_(context.settings, config, context.channel, context.parameters, {}),
        diloco_(rule_.diloco()) {}

  void adopt_view(std::uint64_t k, const peer::View& view) override { rule_.adopt_view(k, view); }
  std::optional<ChosenShape> chosen_shape() const override { return rule_.chosen_shape(); }
  void step(std::uint64_t k, std::uint64_t) override {
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
  std::vector<OptimizerSpan> checkpoint_state() const override { return rule_.checkpoint_state({}); }
  void restore(const Checkpoint& cp) override {
    AttachedTrainer::restore(cp);
    rule_.restore(cp);
  }

 private:
  std::function<void()> pull_;
  DilocoRule rule_;
  gossip::Diloco& diloco_;
};

class Diloco final : public Algorithm {
 public:
  std::string_view name() const override { return "diloco"; }
  std::span<const AlgorithmOption* const> options() const override { return kOptions; }
  // The overlap follows the network unless given (its declared default, auto), and a small federation
  // syncs in one crossing: `--algo diloco` alone hides the latency it meets (the ring's 2(n − 1)
  // crossings in a row can outlast H steps at a few hundred milliseconds, and no overlap within H
  // hides that).
  void apply_defaults(SiteConfig& config, const OptionGiven& given) const override {
    adopt_renamed_shape_options(config, given);
    if (!given("exchange")) config.exchange = "auto";
  }
  void check(const SiteSettings& s, std::vector<std::string>& problems) const override {
    const int inner_steps = inner_steps_of(s);
    if (!overlap_is_auto(s) && overlap_of(s) > inner_steps)
      problems.push_back("--overlap: diloco's overlap τ = " + std::to_string(overlap_of(s)) +
                         " exceeds --inner-steps H = " + std::to_string(inner_steps) +
                         " (an exchange must land before its fragment syncs again)");
    if (const int fragments = fragments_of(s); fragments < 1 || fragments > inner_steps)
      problems.push_back("--" + std::string(kFragments.name) + ": " + std::to_string(fragments) +
                         " must be in [1, --inner-steps " + std::to_string(inner_steps) +
                         "] (one fragment sync per step at most)");
  }
  bool reads(std::string_view option) const override { return option == "compression" || option == "exchange"; }
  std::uint64_t view_change_reach(const SiteSettings& s) const override { return diloco_view_change_reach(s); }
  bool shape_from_network(const SiteSettings& s) const override { return overlap_is_auto(s); }
  bool accepts(gossip::Encoding encoding) const override { return encoding != gossip::Encoding::kTopK; }
  std::string describe_knobs(const SiteSettings& s) const override {
    const auto& o = s.options;
    const int fragments = fragments_of(s);
    char outer[64];
    std::snprintf(outer, sizeof outer, "outer lr %g, outer momentum %g (Nesterov)", o.algorithm_options.real(kOuterLr),
                  o.algorithm_options.real(kOuterMomentum));
    std::string out = "H = " + std::to_string(inner_steps_of(s)) + " inner steps (" + o.optimizer +
                      "), overlap τ = " + (overlap_is_auto(s) ? "auto" : std::to_string(overlap_of(s))) +
                      ", F = " + std::to_string(fragments) + " fragment" + (fragments == 1 ? "" : "s") + ", " + outer +
                      ", wire " + gossip::diloco_wire_name(s.compression) + ", exchange " + describe_exchange(s);
    return out;
  }
  // Exchanges carry a fragment's pseudo-gradient (n/F floats, no multiple of the model's length when
  // F > 1); the re-average after a view change carries (θ_g, m), two model lengths, and the
  // normalization statistics.
  WireLimits wire_limits(const SiteSettings& s) const override { return {fragments_of(s) == 1, 2, true}; }
  BufferSizes buffer_sizes(const SiteSettings&, std::size_t parameters) const override {
    return {2 * parameters, parameters};
  }
  MixerSet make_mixers(const MixerContext& c) const override { return exact_mean_mixers(c); }
  bool takes_exact_means() const override { return true; }
  std::unique_ptr<TrainerAlgorithm> make_trainer(const TrainerContext& context) const override {
    return make_diloco_trainer(context, diloco_config_of(context.settings));
  }
  std::optional<TrainerHook> attached_hook() const override { return TrainerHook::kParameters; }
  std::unique_ptr<AttachedTrainer> make_attached_trainer(const AttachedContext& context) const override {
    return make_attached_diloco_trainer(context, diloco_config_of(context.settings));
  }
};

}  // namespace

const AlgorithmOption& inner_steps_option() { return kInnerSteps; }
const AlgorithmOption& overlap_option() { return kOverlap; }
const AlgorithmOption& outer_lr_option() { return kOuterLr; }
const AlgorithmOption& outer_momentum_option() { return kOuterMomentum; }

std::unique_ptr<TrainerAlgorithm> make_diloco_trainer(const TrainerContext& context,
                                                      const gossip::DilocoConfig& config) {
  return std::make_unique<DilocoTrainer>(context, config);
}

std::unique_ptr<AttachedTrainer> make_attached_diloco_trainer(const AttachedContext& context,
                                                              const gossip::DilocoConfig& config) {
  return std::make_unique<AttachedDilocoTrainer>(context, config);
}

const Algorithm& diloco_algorithm() {
  static const Diloco algorithm;
  return algorithm;
}

std::vector<OptimizerSpan> outer_state_sections(const gossip::Diloco& diloco) {
  return {OptimizerSpan{kGlobalSection, diloco.global_parameters()},
          OptimizerSpan{kMomentumSection, diloco.outer_momentum()}};
}

void restore_outer_state(const Checkpoint& checkpoint, gossip::Diloco& diloco) {
  for (const auto& [name, target] :
       {std::pair{kGlobalSection, diloco.global_parameters()}, std::pair{kMomentumSection, diloco.outer_momentum()}}) {
    const auto* section = checkpoint.find_optimizer_state(name);
    if (section == nullptr) throw CheckpointError(std::string("checkpoint has no '") + name + "' section for diloco");
    check_checkpoint_size(section->size(), target.size(), name);
    std::copy(section->begin(), section->end(), target.begin());
  }
}

}  // namespace meridian::daemon::algorithms
