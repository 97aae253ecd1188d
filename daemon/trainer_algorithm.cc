#include "daemon/trainer_algorithm.h"

#include <algorithm>
#include <cmath>

#include "daemon/async_parameter_copy.h"
#include "daemon/backend_parameters.h"
#include "daemon/backend_push_sum.h"
#include "daemon/host_mirror.h"
#include "gossip/delayed_mixing.h"
#include "gossip/dts.h"
#include "gossip/osgp_split.h"
#include "gossip/push_sum.h"
#include "gossip/synchronous_average.h"
#include "gossip/tensor_codec.h"
#include "models/optimizer.h"

namespace meridian::daemon {
namespace {

using std::chrono::milliseconds;

milliseconds wait_timeout(const SiteConfig& config) {
  // A mix can take a round deadline, then a view change, then the redone round.
  return milliseconds(static_cast<long long>(config.round_timeout * 1000.0)) * 3 + std::chrono::seconds(60);
}

models::OptimizerConfig optimizer_of(const SiteConfig& config) {
  models::OptimizerConfig o;
  o.kind = models::parse_optimizer_kind(config.optimizer);
  o.momentum = static_cast<float>(config.momentum);
  o.weight_decay = static_cast<float>(config.weight_decay);
  return o;
}

// Whether dts' window average is exact: the ring's and the dense direct exchange's are, a compressed
// one is not (the daemon's communication thread picks the mixer the same way).
bool exact_window_mean(const SiteConfig& config) {
  const auto compression = gossip::parse_compression(config.compression).value_or(gossip::CompressionSpec{});
  return compression.encoding == gossip::Encoding::kDense;
}

void check_size(std::size_t got, std::size_t want, const std::string& what) {
  if (got != want) {
    throw CheckpointError("checkpoint " + what + " holds " + std::to_string(got) + " values, this model needs " +
                          std::to_string(want));
  }
}

// The algorithms that run the configured optimizer themselves (all but dts).
class WithOptimizer : public TrainerAlgorithm {
 public:
  WithOptimizer(const SiteConfig& config, models::Model& model, const models::ScheduleConfig& schedule,
                std::shared_ptr<models::Backend> backend)
      : model_(model),
        mirror_(model),
        optimizer_(optimizer_of(config), schedule, model.parameters().size(), std::move(backend)) {}

  std::span<const float> checkpoint_parameters() const override {
    mirror_.pull_parameters();
    return mirror_.parameters();
  }
  std::vector<OptimizerSpan> checkpoint_state() const override {
    if (optimizer_.state().empty()) return {};
    if (!mirror_.mirrored()) return {OptimizerSpan{"optimizer", optimizer_.state()}};
    state_copy_.resize(optimizer_.state().size());
    optimizer_.read_state(state_copy_);
    return {OptimizerSpan{"optimizer", state_copy_}};
  }
  void restore(const Checkpoint& cp) override {
    check_size(cp.parameters.size(), model_.parameters().size(), "parameters");
    model_.write_parameters(cp.parameters);
    mirror_.pull_parameters();
    restore_state(cp);
  }

 protected:
  void restore_state(const Checkpoint& cp) {
    if (optimizer_.state().empty()) return;
    const auto* state = cp.find_optimizer_state("optimizer");
    if (state == nullptr) throw CheckpointError("checkpoint has no optimizer state for --optimizer");
    check_size(state->size(), optimizer_.state().size(), "optimizer state");
    optimizer_.write_state(*state);
  }
  // The optimizer state as host memory: the state itself on the CPU, a fresh copy of it on a device.
  std::span<float> host_state() {
    if (!mirror_.mirrored()) return optimizer_.state();
    state_copy_.resize(optimizer_.state().size());
    optimizer_.read_state(state_copy_);
    return state_copy_;
  }
  void optimizer_step(std::uint64_t local_step) {
    optimizer_.set_step_count(local_step);  // the same rate on every site, also after a rejoin
    optimizer_.step(model_.parameters(), model_.gradients(), model_.pool());
  }

  models::Model& model_;
  mutable HostMirror mirror_;  // host views for gossip/ (the model's own buffers on the CPU)
  models::Optimizer optimizer_;
  mutable std::vector<float> state_copy_;  // (state) host copy of a device optimizer state
};

class Local final : public WithOptimizer {
 public:
  using WithOptimizer::WithOptimizer;
  void step(std::uint64_t, std::uint64_t local_step) override { optimizer_step(local_step); }
};

class AllReduce final : public WithOptimizer {
 public:
  AllReduce(const SiteConfig& config, models::Model& model, gossip::MixChannel& channel,
      const models::ScheduleConfig& schedule, std::shared_ptr<models::Backend> backend)
      : WithOptimizer(config, model, schedule, std::move(backend)), channel_(channel), timeout_(wait_timeout(config)) {}

  void step(std::uint64_t k, std::uint64_t local_step) override {
    // Synchronous copies on a GPU, not a background snapshot: the average of this step's gradient is
    // needed before this step's optimizer update, so there is no compute to hide the copy behind.
    mirror_.pull_gradients();
    const auto report = gossip::average_now(channel_, k, mirror_.gradients(), timeout_);
    mirror_.push_gradients();
    abandoned_ += report.abandoned;
    optimizer_step(local_step);
    // Every site sees the view change at the same round (views are announced ahead; an abandoned round
    // is redone by all survivors in the same newer view), so they all re-average here together.
    if (!have_view_ || report.view_id != view_id_) reaverage(k);
    have_view_ = true;
    view_id_ = report.view_id;
  }

  std::uint64_t rounds_abandoned() const override { return abandoned_; }

 private:
  // Parameters and optimizer state averaged as one tensor: the ring's all-gather hands every site the
  // same bits, so the replicas are identical again even after a site came back from a checkpoint.
  void reaverage(std::uint64_t k) {
    mirror_.pull_parameters();
    auto params = mirror_.parameters();
    auto state = host_state();
    gossip::MixJob job{k, gossip::RoundTag::kReaverage, channel_.buffer(), 1.0};
    job.data.resize(params.size() + state.size());
    std::copy(params.begin(), params.end(), job.data.begin());
    std::copy(state.begin(), state.end(), job.data.begin() + static_cast<std::ptrdiff_t>(params.size()));
    channel_.submit(std::move(job), timeout_);
    auto result = channel_.wait(k, gossip::RoundTag::kReaverage, timeout_);
    abandoned_ += result.report.abandoned;
    std::copy(result.data.begin(), result.data.begin() + static_cast<std::ptrdiff_t>(params.size()), params.begin());
    std::copy(result.data.begin() + static_cast<std::ptrdiff_t>(params.size()), result.data.end(), state.begin());
    channel_.recycle(std::move(result.data));
    mirror_.push_parameters();
    if (mirror_.mirrored()) optimizer_.write_state(state);
  }

  gossip::MixChannel& channel_;
  milliseconds timeout_;
  bool have_view_ = false;
  std::uint64_t view_id_ = 0;
  std::uint64_t abandoned_ = 0;
};

// sgp's mixing: overlap (τ split with the mixer, gossip/osgp_split.h), no re-averaging (numerators have
// no meaningful exact mean).
gossip::DelayedMixingConfig sgp_mixing(const SiteConfig& config) {
  const auto split = gossip::osgp_split(static_cast<std::uint32_t>(config.tau));
  return gossip::DelayedMixingConfig{split.delay, true, gossip::stable_mix_step(split.delay), 0, false,
                                     wait_timeout(config)};
}

// The factor of sgp's update: a gain only where the mixer leaves shares in flight (τ ≥ 2).
gossip::PushSumStepScale sgp_step_scale(const SiteConfig& config) {
  const auto split = gossip::osgp_split(static_cast<std::uint32_t>(config.tau));
  return gossip::PushSumStepScale(split.mixer_staleness, static_cast<std::size_t>(config.out_peers));
}

class Sgp final : public WithOptimizer {
 public:
  Sgp(const SiteConfig& config, models::Model& model, gossip::MixChannel& channel,
      const models::ScheduleConfig& schedule, std::shared_ptr<models::Backend> backend)
      : WithOptimizer(config, model, schedule, std::move(backend)),
        push_sum_(sgp_mixing(config), channel, mirror_.parameters(), sgp_step_scale(config)) {}

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
    check_size(cp.parameters.size(), model_.parameters().size(), "parameters");
    push_sum_.restore(cp.parameters, cp.push_sum_weight, cp.push_sum_weight_average);
    mirror_.push_parameters();
    restore_state(cp);
  }

 private:
  gossip::PushSum push_sum_;
};

// sgp on a device backend: the numerator, the optimizer's displacement and the push-sum arithmetic stay
// in device memory (daemon/backend_push_sum.h); only the mixing snapshot and its result cross the bus.
class SgpOnDevice final : public WithOptimizer {
 public:
  SgpOnDevice(const SiteConfig& config, models::Model& model, gossip::MixChannel& channel,
              const models::ScheduleConfig& schedule, std::shared_ptr<models::Backend> backend)
      : WithOptimizer(config, model, schedule, std::move(backend)),
        push_sum_(sgp_mixing(config), channel, model, sgp_step_scale(config)),
        before_(model.backend(), model.parameter_count()) {}

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
    check_size(cp.parameters.size(), model_.parameters().size(), "parameters");
    push_sum_.restore(cp.parameters, cp.push_sum_weight, cp.push_sum_weight_average);
    restore_state(cp);
  }

 private:
  mutable BackendPushSum push_sum_;
  models::BackendBuffer<float> before_;  // (n) z before the optimizer step, backend memory
};

class Dsync final : public WithOptimizer {
 public:
  Dsync(const SiteConfig& config, models::Model& model, gossip::MixChannel& channel,
        const models::ScheduleConfig& schedule, std::shared_ptr<models::Backend> backend)
      : WithOptimizer(config, model, schedule, std::move(backend)),
        store_(parameter_store(model)),
        mixing_(gossip::DelayedMixingConfig{static_cast<std::uint32_t>(config.delay), false,
                                            gossip::stable_mix_step(static_cast<std::uint32_t>(config.delay)),
                                            static_cast<std::uint64_t>(config.reaverage_every), true,
                                            wait_timeout(config)},
                channel, *store_) {}

  void step(std::uint64_t k, std::uint64_t local_step) override {
    // On a GPU with D > 0, step k − 1's snapshot was copied while this step's forward and backward pass
    // ran; it is handed over before the optimizer writes the parameters. Nothing to do on the CPU.
    mixing_.before_update();
    optimizer_step(local_step);
    mixing_.after_step(k);
  }
  void finish() override { mixing_.finish(); }
  std::uint64_t staleness() const override { return mixing_.in_flight(); }
  std::uint64_t rounds_abandoned() const override { return mixing_.abandoned_rounds(); }

 private:
  // The model's own host buffer on the CPU; on a device the parameters stay there, the snapshot is read
  // from it and the delayed compensation runs on it (daemon/backend_parameters.h).
  static std::unique_ptr<gossip::ParameterStore> parameter_store(models::Model& model) {
    if (model.backend().host_addressable()) return std::make_unique<gossip::HostParameters>(model.parameters());
    return std::make_unique<BackendParameters>(model.backend(), model.parameters(),
                                               make_async_parameter_copy(model.backend(), model.parameter_count()));
  }

  std::unique_ptr<gossip::ParameterStore> store_;
  gossip::DelayedMixing mixing_;
};

class DtsAlgorithm final : public TrainerAlgorithm {
 public:
  DtsAlgorithm(const SiteConfig& config, models::Model& model, gossip::MixChannel& channel,
               const models::ScheduleConfig& schedule)
      : model_(model),
        mirror_(model),
        schedule_(schedule),
        weight_decay_(static_cast<float>(config.weight_decay)),
        momentum_buffer_(config.optimizer == "momentum" ? model.parameters().size() : 0),
        dts_(gossip::DtsConfig{static_cast<std::uint32_t>(config.delay), static_cast<std::uint32_t>(config.period),
                               config.optimizer == "momentum" ? config.momentum : 0.0,
                               gossip::parse_dts_compensation(config.compensation).value_or(gossip::DtsCompensation::kExact),
                               static_cast<std::uint64_t>(config.reaverage_every),
                               wait_timeout(config), exact_window_mean(config)},
             channel, mirror_.parameters(), momentum_buffer_) {}

  void step(std::uint64_t k, std::uint64_t local_step) override {
    // Synchronous copies on a GPU, not a background snapshot: gossip::Dts updates and snapshots the
    // parameters on the host, so the gradient must be down before the update and the parameters up
    // before the next forward pass; the snapshot itself is a host copy inside Dts.
    mirror_.pull_gradients();
    auto g = mirror_.gradients();
    if (weight_decay_ != 0.0f) {
      // L2 decay folded into the gradient, as torch.optim.SGD does before the momentum update.
      const auto w = mirror_.parameters();
      for (std::size_t i = 0; i < g.size(); ++i) g[i] += weight_decay_ * w[i];
    }
    dts_.step(k, g, schedule_.at(local_step));
    mirror_.push_parameters();
  }
  void finish() override {
    dts_.finish();
    mirror_.push_parameters();
  }
  void finish_stopped() override {
    dts_.stop();
    mirror_.push_parameters();
  }
  std::uint64_t staleness() const override { return dts_.in_flight(); }
  std::uint64_t rounds_abandoned() const override { return dts_.abandoned_rounds(); }
  std::span<const float> checkpoint_parameters() const override { return mirror_.parameters(); }
  std::vector<OptimizerSpan> checkpoint_state() const override {
    if (momentum_buffer_.empty()) return {};
    return {OptimizerSpan{"momentum", momentum_buffer_}};
  }
  void restore(const Checkpoint& cp) override {
    check_size(cp.parameters.size(), model_.parameters().size(), "parameters");
    model_.write_parameters(cp.parameters);
    mirror_.pull_parameters();
    if (momentum_buffer_.empty()) return;
    const auto* u = cp.find_optimizer_state("momentum");
    if (u == nullptr) throw CheckpointError("checkpoint has no momentum buffer for dts with --optimizer momentum");
    check_size(u->size(), momentum_buffer_.size(), "momentum buffer");
    std::copy(u->begin(), u->end(), momentum_buffer_.begin());
  }

 private:
  models::Model& model_;
  mutable HostMirror mirror_;  // host views for gossip/ (the model's own buffers on the CPU)
  models::LearningRateSchedule schedule_;
  float weight_decay_;
  std::vector<float> momentum_buffer_;  // (n) heavy-ball u; empty for plain SGD
  gossip::Dts dts_;
};

}  // namespace

models::ScheduleConfig schedule_of(const SiteConfig& config, std::uint64_t steps_per_epoch, std::uint64_t total_steps) {
  models::ScheduleConfig s;
  s.base_lr = static_cast<float>(config.lr);
  s.total_steps = std::max<std::uint64_t>(1, total_steps);
  const auto spec = parse_schedule(config.schedule).value_or(ScheduleSpec{});
  switch (spec.kind) {
    case ScheduleSpec::Kind::kConstant:
      s.kind = models::ScheduleKind::constant;
      break;
    case ScheduleSpec::Kind::kStep:
      s.kind = models::ScheduleKind::step;
      s.step_size = std::max<std::uint64_t>(1, static_cast<std::uint64_t>(spec.step_epochs) * steps_per_epoch);
      s.gamma = static_cast<float>(spec.step_factor);
      break;
    case ScheduleSpec::Kind::kCosine:
      s.kind = models::ScheduleKind::cosine;
      break;
  }
  return s;
}

std::vector<std::string> algorithm_config_problems(const SiteConfig& config) {
  std::vector<std::string> problems;
  if (config.algo == "dts" && config.optimizer != "sgd" && config.optimizer != "momentum") {
    problems.push_back("--optimizer: dts is its own optimizer and supports sgd or momentum (heavy-ball), not '" +
                       config.optimizer + "' (use --optimizer momentum, or another --algo)");
  }
  if (config.algo == "dts" && config.momentum != 0 && config.optimizer == "momentum" && config.momentum >= 1) {
    problems.push_back("--momentum: must be below 1 for dts");
  }
  if (config.algo == "sgp" && config.delay != 0) {
    problems.push_back("--delay: sgp overlaps its mixing by --tau steps; --delay applies to dts and dsync only");
  }
  if ((config.algo == "allreduce" || config.algo == "local") && config.delay != 0) {
    problems.push_back("--delay: " + config.algo + " has no delayed mixing (use dts, sgp or dsync)");
  }
  return problems;
}

std::unique_ptr<TrainerAlgorithm> make_trainer_algorithm(const SiteConfig& config, models::Model& model,
                                                         std::shared_ptr<models::Backend> backend,
                                                         gossip::MixChannel& channel,
                                                         const models::ScheduleConfig& schedule) {
  if (const auto problems = algorithm_config_problems(config); !problems.empty()) {
    std::string text = "the algorithm cannot run with this configuration:";
    for (const auto& p : problems) text += "\n  " + p;
    throw AlgorithmConfigError(text);
  }
  const auto algo = gossip::parse_algorithm(config.algo);
  if (!algo) throw AlgorithmConfigError("--algo: unknown algorithm '" + config.algo + "'");
  switch (*algo) {
    case gossip::Algorithm::kAllReduce: return std::make_unique<AllReduce>(config, model, channel, schedule, backend);
    case gossip::Algorithm::kDts: return std::make_unique<DtsAlgorithm>(config, model, channel, schedule);
    case gossip::Algorithm::kSgp:
      if (!model.backend().host_addressable())
        return std::make_unique<SgpOnDevice>(config, model, channel, schedule, backend);
      return std::make_unique<Sgp>(config, model, channel, schedule, backend);
    case gossip::Algorithm::kDsync: return std::make_unique<Dsync>(config, model, channel, schedule, backend);
    case gossip::Algorithm::kLocal: return std::make_unique<Local>(config, model, schedule, backend);
  }
  throw AlgorithmConfigError("--algo: unknown algorithm '" + config.algo + "'");
}

}  // namespace meridian::daemon
