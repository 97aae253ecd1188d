#include "daemon/algorithms/local.h"

#include "daemon/algorithms/optimizer_trainer.h"

namespace meridian::daemon::algorithms {
namespace {

class LocalTrainer final : public OptimizerTrainer {
 public:
  using OptimizerTrainer::OptimizerTrainer;
  void step(std::uint64_t, std::uint64_t local_step) override { optimizer_step(local_step); }
};

// Attached: the trainer's optimizer alone; the parameters cross only for checkpoints.
class AttachedLocalTrainer final : public AttachedTrainer {
 public:
  explicit AttachedLocalTrainer(const AttachedContext& context) : AttachedTrainer(context) {}
  void step(std::uint64_t, std::uint64_t) override {}
};

class Local final : public Algorithm {
 public:
  std::string_view name() const override { return "local"; }
  void check(const SiteSettings& s, std::vector<std::string>& problems) const override {
    if (s.options.delay != 0) problems.push_back("--delay: local has no delayed mixing (use dts, sgp or dsync)");
  }
  std::string describe_knobs(const SiteSettings&) const override { return ""; }
  bool communicates() const override { return false; }
  WireLimits wire_limits(const SiteSettings&) const override { return {}; }
  BufferSizes buffer_sizes(const SiteSettings&, std::size_t parameters) const override {
    return {parameters, parameters};
  }
  std::unique_ptr<TrainerAlgorithm> make_trainer(const TrainerContext& context) const override {
    return std::make_unique<LocalTrainer>(context);
  }
  std::optional<TrainerHook> attached_hook() const override { return TrainerHook::kParameters; }
  std::unique_ptr<AttachedTrainer> make_attached_trainer(const AttachedContext& context) const override {
    return std::make_unique<AttachedLocalTrainer>(context);
  }
};

}  // namespace

const Algorithm& local_algorithm() {
  static const Local algorithm;
  return algorithm;
}

}  // namespace meridian::daemon::algorithms
