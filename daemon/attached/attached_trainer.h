// The daemon's side of an attached trainer: a site whose forward and backward passes, and whose
// optimizer, run in another local process (a PyTorch loop using python/meridian), while the daemon runs
// membership, the algorithm's rounds, checkpoints of what the algorithm owns, metrics and the status
// page (`meridian start --trainer attached`; docs/pytorch.md).
//
// The trainer's tensors and the daemon meet in one shared segment (daemon/attached/shared_segment.h): the
// parameters at float 0 and the gradients at float n, float32, n = the declared model's parameter
// count (daemon/attached/attached_model.h). The trainer copies its tensors in and out of it, one copy each way;
// the daemon mixes in place. Each algorithm says where it hooks the trainer's step (its TrainerHook)
// and makes its attached trainer side, in its own file under daemon/algorithms/
// (Algorithm::attached_hook and make_attached_trainer): the rule is gossip/'s, the same code its
// built-in trainer runs, and the attached side only decides where it hooks and when the parameters must
// be pulled. The trainer's optimizer state is the trainer's: it is neither mixed nor checkpointed here.
//
// Thread-safety: one trainer thread. Borrows the segment and the channel, which must outlive it.
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "daemon/site_config.h"
#include "daemon/trainer_algorithm.h"
#include "daemon/attached/trainer_protocol.h"
#include "gossip/mix_channel.h"
#include "models/lr_schedule.h"

namespace meridian::daemon {

struct AttachedContext {
  const SiteSettings& settings;
  std::span<float> parameters;  // (n) in the shared segment; the trainer's initial values when built
  std::span<float> gradients;   // (n) in the shared segment
  gossip::MixChannel& channel;
  // Asks the trainer for its current parameters in the segment (waits for them); throws what the
  // channel throws. The trainer side calls it only when its rule reads the parameters.
  std::function<void()> pull;
  // The learning rate over the run, for an algorithm whose update the site runs (TrainerHook::kUpdate).
  models::ScheduleConfig schedule;
};

// What a step changed in the segment, which the trainer copies back into its tensors.
struct AttachedChanges {
  bool gradients = false;
  bool parameters = false;
};

class AttachedTrainer : public TrainerAlgorithm {
 public:
  // What the steps and finish() since the last call changed; resets it.
  AttachedChanges take_changes() { return std::exchange(changes_, {}); }
  // The parameters a checkpoint stores are the segment's: the caller pulls them first.
  std::span<const float> checkpoint_parameters() const override { return parameters_; }
  std::vector<OptimizerSpan> checkpoint_state() const override { return {}; }
  // Writes the checkpoint's parameters into the segment (the trainer copies them in at its start).
  // Throws CheckpointError for another size.
  void restore(const Checkpoint& checkpoint) override;

 protected:
  explicit AttachedTrainer(const AttachedContext& context) : parameters_(context.parameters) {}
  std::span<float> parameters_;
  AttachedChanges changes_;
};

// The algorithms a site can run attached, in the order the registry lists them.
std::vector<std::string> attached_algorithm_names();
// "" when `settings`' algorithm runs attached; else the problem, naming the ones that do.
std::string attached_support_problem(const SiteSettings& settings);
// `settings`' algorithm's hook (Algorithm::attached_hook), for settings attached_support_problem()
// accepts (throws error::InternalError otherwise).
TrainerHook attached_hook(const SiteSettings& settings);
// `settings`' algorithm's attached trainer side (Algorithm::make_attached_trainer), for settings
// attached_support_problem() accepts (throws error::InternalError otherwise).
std::unique_ptr<AttachedTrainer> make_attached_trainer(const AttachedContext& context);

}  // namespace meridian::daemon
