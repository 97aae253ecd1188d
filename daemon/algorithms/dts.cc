#include "daemon/algorithms/dts.h"

#include <algorithm>
#include <functional>

#include "daemon/algorithms/optimizer_trainer.h"
#include "daemon/backend/host_mirror.h"
#include "gossip/dts.h"

namespace meridian::daemon::algorithms {
namespace {

bool with_momentum(const SiteSettings& s) { return s.optimizer == models::OptimizerKind::momentum; }

constexpr DtsShape kFallbackShape{kDtsDefaultDelay, kDtsDefaultPeriod};

gossip::DtsConfig config_of(const SiteSettings& s) {
  // The window average is exact over the ring and the dense direct exchange, not a compressed one.
  const bool exact_window_mean = s.compression.encoding == gossip::Encoding::kDense;
  const bool automatic = delay_is_auto(s);
  return gossip::DtsConfig{automatic ? kFallbackShape.delay : static_cast<std::uint32_t>(s.options.delay),
                           automatic ? kFallbackShape.period : static_cast<std::uint32_t>(s.options.period),
                           with_momentum(s) ? s.options.momentum : 0.0,
                           s.compensation,
                           static_cast<std::uint64_t>(s.options.reaverage_every),
                           mix_wait_timeout(s),
                           exact_window_mean};
}

// What every trainer side of dts shares, built-in or attached: gossip::Dts (the update and its delayed
// compensation) on the parameters it is given, with its heavy-ball buffer, the L2 decay folded into
// the gradient, the shape chosen from the network (--delay auto), and the "momentum" section.
class DtsRule {
 public:
  DtsRule(const SiteSettings& settings, gossip::MixChannel& channel, std::span<float> parameters,
          std::span<float> state)
      : weight_decay_(static_cast<float>(settings.options.weight_decay)),
        momentum_buffer_(with_momentum(settings) ? parameters.size() : 0),
        auto_(delay_is_auto(settings)),
        direct_max_sites_(direct_exchange_max_sites(settings)),
        dts_(config_of(settings), channel, parameters, momentum_buffer_, state) {}

  gossip::Dts& dts() { return dts_; }
  const gossip::Dts& dts() const { return dts_; }

  // With --delay auto, round k's view's pace picks the shape: `around` is handed dts' reshape, to run
  // between the caller's copies of the parameters.
  void adopt_view(std::uint64_t k, const peer::View& view,
                  const std::function<void(const std::function<void()>&)>& around) {
    if (!auto_ || (shape_ && shape_->view_id == view.id)) return;
    const DtsShape shape =
        choose_dts_shape(view.pace, exchange_crossings(view.size(), view.size() <= direct_max_sites_), kFallbackShape);
    const bool changed = !shape_ || shape_->delay != shape.delay || shape_->period != shape.period;
    // Every site reshapes at round k, the view's first round or the round it joins at (gossip/dts.h).
    around([&] { dts_.reshape(k, shape.delay, shape.period); });
    shape_ = ChosenShape{"D = " + std::to_string(shape.delay) + ", P = " + std::to_string(shape.period),
                         shape.delay,
                         shape.period,
                         0,
                         view.pace,
                         view.id,
                         changed ? k : shape_->from_round};
  }
  const std::optional<ChosenShape>& chosen_shape() const { return shape_; }

  // Round k's update from the gradient g (overwritten) at the parameters w.
  void step(std::uint64_t k, std::span<float> g, std::span<const float> w, double lr) {
    if (weight_decay_ != 0.0f) {
      // L2 decay folded into the gradient, as torch.optim.SGD does before the momentum update.
      for (std::size_t i = 0; i < g.size(); ++i) g[i] += weight_decay_ * w[i];
    }
    dts_.step(k, g, lr);
  }

  std::vector<OptimizerSpan> checkpoint_state() const {
    if (momentum_buffer_.empty()) return {};
    return {OptimizerSpan{"momentum", momentum_buffer_}};
  }
  void restore_momentum(const Checkpoint& cp) {
    if (momentum_buffer_.empty()) return;
    const auto* u = cp.find_optimizer_state("momentum");
    if (u == nullptr) throw CheckpointError("checkpoint has no momentum buffer for dts with --optimizer momentum");
    check_checkpoint_size(u->size(), momentum_buffer_.size(), "momentum buffer");
    std::copy(u->begin(), u->end(), momentum_buffer_.begin());
  }

 private:
  float weight_decay_;
  std::vector<float> momentum_buffer_;  // (n) heavy-ball u; empty for plain SGD
  const bool auto_;                     // --delay auto: the shape follows the view's pace
  const std::size_t direct_max_sites_;  // views up to this size exchange in one crossing (else the ring's 2(n − 1))
  std::optional<ChosenShape> shape_;    // the shape in force, with --delay auto
  gossip::Dts dts_;
};

class DtsTrainer final : public TrainerAlgorithm {
 public:
  explicit DtsTrainer(const TrainerContext& context)
      : model_(context.model),
        mirror_(context.model),
        schedule_(context.schedule),
        // Re-averages carry the normalization statistics (gossip/dts.h).
        rule_(context.settings, context.channel, mirror_.parameters(), mirror_.state()) {}

  void adopt_view(std::uint64_t k, const peer::View& view) override {
    rule_.adopt_view(k, view, [&](const std::function<void()>& reshape) {
      mirror_.pull_state();
      reshape();
      mirror_.push_parameters();
      mirror_.push_state();
    });
  }
  std::optional<ChosenShape> chosen_shape() const override { return rule_.chosen_shape(); }

  void step(std::uint64_t k, std::uint64_t local_step) override {
    // Synchronous copies on a GPU, not a background snapshot: gossip::Dts updates and snapshots the
    // parameters on the host, so the gradient must be down before the update and the parameters up
    // before the next forward pass; the snapshot itself is a host copy inside Dts.
    mirror_.pull_gradients();
    mirror_.pull_state();
    rule_.step(k, mirror_.gradients(), mirror_.parameters(), schedule_.at(local_step));
    mirror_.push_parameters();
    mirror_.push_state();
  }
  void finish() override {
    mirror_.pull_state();
    rule_.dts().finish();
    mirror_.push_parameters();
    mirror_.push_state();
  }
  void finish_stopped() override {
    mirror_.pull_state();
    rule_.dts().stop();
    mirror_.push_parameters();
    mirror_.push_state();
  }
  std::uint64_t staleness() const override { return rule_.dts().in_flight(); }
  std::uint64_t rounds_abandoned() const override { return rule_.dts().abandoned_rounds(); }
  std::span<const float> checkpoint_parameters() const override { return mirror_.parameters(); }
  std::vector<OptimizerSpan> checkpoint_state() const override { return rule_.checkpoint_state(); }
  void restore(const Checkpoint& cp) override {
    check_checkpoint_size(cp.parameters.size(), model_.parameters().size(), "parameters");
    model_.write_parameters(cp.parameters);
    mirror_.pull_parameters();
    rule_.restore_momentum(cp);
  }

 private:
  models::Model& model_;
  mutable HostMirror mirror_;  // host views for gossip/ (the model's own buffers on the CPU)
  models::LearningRateSchedule schedule_;
  DtsRule rule_;
};

// The attached trainer side (daemon/attached/attached_trainer.h): dts is its own optimizer, so its update takes
// the place of the trainer's optimizer step (TrainerHook::kUpdate): the trainer's gradients come in
// with its step, the site runs the same update and delayed compensation on the segment's parameters
// as the built-in trainer, and the trainer copies them back. The segment's parameters are the site's
// own from the first step on, so they are never pulled.
class AttachedDtsTrainer final : public AttachedTrainer {
 public:
  explicit AttachedDtsTrainer(const AttachedContext& context)
      : AttachedTrainer(context),
        gradients_(context.gradients),
        schedule_(context.schedule),
        rule_(context.settings, context.channel, context.parameters, {}) {}

  void adopt_view(std::uint64_t k, const peer::View& view) override {
    rule_.adopt_view(k, view, [&](const std::function<void()>& reshape) {
      reshape();
      changes_.parameters = true;
    });
  }
  std::optional<ChosenShape> chosen_shape() const override { return rule_.chosen_shape(); }
  void step(std::uint64_t k, std::uint64_t local_step) override {
    rule_.step(k, gradients_, parameters_, schedule_.at(local_step));
    changes_.parameters = true;
  }
  void finish() override {
    rule_.dts().finish();
    changes_.parameters = true;
  }
  void finish_stopped() override {
    rule_.dts().stop();
    changes_.parameters = true;
  }
  std::uint64_t staleness() const override { return rule_.dts().in_flight(); }
  std::uint64_t rounds_abandoned() const override { return rule_.dts().abandoned_rounds(); }
  std::vector<OptimizerSpan> checkpoint_state() const override { return rule_.checkpoint_state(); }
  void restore(const Checkpoint& cp) override {
    AttachedTrainer::restore(cp);
    rule_.restore_momentum(cp);
  }

 private:
  std::span<float> gradients_;
  models::LearningRateSchedule schedule_;
  DtsRule rule_;
};

class Dts final : public Algorithm {
 public:
  std::string_view name() const override { return "dts"; }
  void apply_defaults(SiteConfig& config, const OptionGiven& given) const override {
    if (given("delay") || given("period")) return;
    config.delay = kDtsDefaultDelay;
    config.period = kDtsDefaultPeriod;
  }
  void check(const SiteSettings& s, std::vector<std::string>& problems) const override {
    if (delay_is_auto(s) && s.options.period != 1)
      problems.push_back("--period: dts with --delay auto chooses P = 8·D itself (give both D and P, or neither)");
    if (s.optimizer != models::OptimizerKind::sgd && s.optimizer != models::OptimizerKind::momentum) {
      problems.push_back("--optimizer: dts is its own optimizer and supports sgd or momentum (heavy-ball), not '" +
                         s.options.optimizer + "' (use --optimizer momentum, or another --algo)");
    }
    if (with_momentum(s) && s.options.momentum >= 1) problems.push_back("--momentum: must be below 1 for dts");
  }
  bool reads(std::string_view option) const override {
    return option == "delay" || option == "period" || option == "reaverage-every" || option == "compensation" ||
           option == "compression" || option == "exchange";
  }
  bool accepts(gossip::Encoding) const override { return true; }
  std::string describe_knobs(const SiteSettings& s) const override {
    const auto& o = s.options;
    std::string out = delay_is_auto(s) ? std::string("D = auto, P = 8·D (chosen from the network)")
                                       : "D = " + std::to_string(o.delay) + ", P = " + std::to_string(o.period);
    if (o.delay == kDtsDefaultDelay && o.period == kDtsDefaultPeriod) out += " (dts' default shape)";
    if (o.delay == 0 && o.period == 1) out += " (waits for every average, as allreduce does)";
    out += ", exchange " + describe_exchange(s) + ", compensation " + o.compensation;
    if (s.compression.encoding != gossip::Encoding::kDense) out += ", compression " + o.compression;
    return out;
  }
  // With momentum, the re-average and every window (P > 1) carry the weights and the momentum buffer
  // as one tensor of two model-sized vectors (gossip/dts.h); a re-average ends with the normalization
  // statistics.
  WireLimits wire_limits(const SiteSettings& s) const override { return {true, with_momentum(s) ? 2u : 1u, true}; }
  // A window carries the weights' and the momentum's displacement; the direct exchange sends and
  // receives whole windows, so its shares on the links are as long.
  BufferSizes buffer_sizes(const SiteSettings& s, std::size_t parameters) const override {
    return {2 * parameters, s.exchange != Exchange::kRing ? 2 * parameters : parameters};
  }
  MixerSet make_mixers(const MixerContext& c) const override { return exact_mean_mixers(c); }
  bool takes_exact_means() const override { return true; }
  bool shape_from_network(const SiteSettings& s) const override { return delay_is_auto(s); }
  std::uint64_t view_change_reach(const SiteSettings& s) const override {
    if (!delay_is_auto(s)) return Algorithm::view_change_reach(s);
    return kAutoDtsMaxDelay + 8 * kAutoDtsMaxDelay;
  }
  std::unique_ptr<TrainerAlgorithm> make_trainer(const TrainerContext& context) const override {
    return std::make_unique<DtsTrainer>(context);
  }
  std::optional<TrainerHook> attached_hook() const override { return TrainerHook::kUpdate; }
  std::unique_ptr<AttachedTrainer> make_attached_trainer(const AttachedContext& context) const override {
    return std::make_unique<AttachedDtsTrainer>(context);
  }
};

}  // namespace

const Algorithm& dts_algorithm() {
  static const Dts algorithm;
  return algorithm;
}

}  // namespace meridian::daemon::algorithms
