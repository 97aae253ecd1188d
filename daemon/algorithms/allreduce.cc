#include "daemon/algorithms/allreduce.h"

#include <algorithm>
#include <functional>

#include "daemon/algorithms/optimizer_trainer.h"
#include "gossip/synchronous_average.h"

namespace meridian::daemon::algorithms {
namespace {

class AllReduceTrainer final : public OptimizerTrainer {
 public:
  explicit AllReduceTrainer(const TrainerContext& context)
      : OptimizerTrainer(context), channel_(context.channel), timeout_(mix_wait_timeout(context.settings)) {}

  void step(std::uint64_t k, std::uint64_t local_step) override {
    // Synchronous copies on a GPU, not a background snapshot: the average of this step's gradient is
    // needed before this step's optimizer update, so there is no compute to hide the copy behind.
    // The normalization statistics ride along with the gradient, so that every site keeps the same
    // running statistics too (PyTorch's DistributedDataParallel keeps them equal by broadcasting rank
    // 0's; the mean is the symmetric rule). A model without them sends the gradient alone, as before.
    mirror_.pull_gradients();
    mirror_.pull_state();
    const auto report = gossip::average_now(channel_, k, mirror_.gradients(), mirror_.state(), timeout_);
    mirror_.push_gradients();
    mirror_.push_state();
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
  // Parameters, optimizer state and normalization statistics averaged as one tensor (in that order):
  // the ring's all-gather hands every site the same bits, so the replicas are identical again even
  // after a site came back from a checkpoint.
  void reaverage(std::uint64_t k) {
    mirror_.pull_parameters();
    mirror_.pull_state();
    auto params = mirror_.parameters();
    auto state = host_state();
    auto stats = mirror_.state();
    gossip::MixJob job{k, gossip::RoundTag::kReaverage, channel_.buffer(), 1.0};
    job.data.assign(params.begin(), params.end());
    job.data.insert(job.data.end(), state.begin(), state.end());
    job.data.insert(job.data.end(), stats.begin(), stats.end());
    channel_.submit(std::move(job), timeout_);
    auto result = channel_.wait(k, gossip::RoundTag::kReaverage, timeout_);
    abandoned_ += result.report.abandoned;
    const auto state_at = result.data.begin() + static_cast<std::ptrdiff_t>(params.size());
    const auto stats_at = state_at + static_cast<std::ptrdiff_t>(state.size());
    std::copy(result.data.begin(), state_at, params.begin());
    std::copy(state_at, stats_at, state.begin());
    std::copy(stats_at, result.data.end(), stats.begin());
    channel_.recycle(std::move(result.data));
    mirror_.push_parameters();
    mirror_.push_state();
    if (mirror_.mirrored()) optimizer_.write_state(state);
  }

  gossip::MixChannel& channel_;
  std::chrono::milliseconds timeout_;
  bool have_view_ = false;
  std::uint64_t view_id_ = 0;
  std::uint64_t abandoned_ = 0;
};

// The attached trainer side (daemon/attached/attached_trainer.h): the trainer's gradients averaged in the
// segment before its optimizer steps, as DistributedDataParallel does.
class AttachedAllReduceTrainer final : public AttachedTrainer {
 public:
  explicit AttachedAllReduceTrainer(const AttachedContext& context)
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

class AllReduce final : public Algorithm {
 public:
  std::string_view name() const override { return "allreduce"; }
  bool takes_exact_means() const override { return true; }
  void check(const SiteSettings& s, std::vector<std::string>& problems) const override {
    if (s.options.delay != 0) problems.push_back("--delay: allreduce has no delayed mixing (use dts, sgp or dsync)");
  }
  std::string describe_knobs(const SiteSettings&) const override { return ""; }
  // The re-average packs parameters and optimizer state (Adam: two moment vectors) into one tensor,
  // which is no whole multiple of the model's length; the gradient average and the re-average end with
  // the normalization statistics.
  WireLimits wire_limits(const SiteSettings&) const override { return {false, 1}; }
  BufferSizes buffer_sizes(const SiteSettings&, std::size_t parameters) const override {
    return {parameters, parameters};
  }
  std::unique_ptr<TrainerAlgorithm> make_trainer(const TrainerContext& context) const override {
    return std::make_unique<AllReduceTrainer>(context);
  }
  std::optional<TrainerHook> attached_hook() const override { return TrainerHook::kGradients; }
  std::unique_ptr<AttachedTrainer> make_attached_trainer(const AttachedContext& context) const override {
    return std::make_unique<AttachedAllReduceTrainer>(context);
  }
};

}  // namespace

const Algorithm& allreduce_algorithm() {
  static const AllReduce algorithm;
  return algorithm;
}

}  // namespace meridian::daemon::algorithms
