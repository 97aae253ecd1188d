// The daemon's side of an attached trainer: a site whose forward and backward passes, and whose
// optimizer, run in another local process (a PyTorch loop using python/meridian), while the daemon runs
// membership, the algorithm's rounds, checkpoints of what the algorithm owns, metrics and the status
// page (`meridian start --trainer attached`; docs/pytorch.md).
//
// The trainer's tensors and the daemon meet in one shared segment (daemon/shared_segment.h): the
// parameters at float 0 and the gradients at float n, float32, n = the declared model's parameter
// count (daemon/attached_model.h). The trainer copies its tensors in and out of it, one copy each way;
// the daemon mixes in place. Each algorithm hooks the trainer's step at one point (its TrainerHook):
//   allreduce   gradients, before the trainer's optimizer step: averaged over the view in place
//               (gossip::average_now), as DistributedDataParallel does; after a view change the
//               parameters are re-averaged too, so every site holds the same bits again
//   diloco      parameters, after the trainer's optimizer step (the inner one): every H/F steps the
//               daemon pulls them and runs the outer step on them (gossip::Diloco)
//   local       parameters, after the step: pulled only for checkpoints
// The rules themselves are gossip/'s, the same code the built-in trainers run (daemon/algorithms/);
// this file only decides where in the trainer's step they hook and when the parameters must be pulled.
// The trainer's optimizer state is the trainer's: it is neither mixed nor checkpointed here.
//
// Thread-safety: one trainer thread. Borrows the segment and the channel, which must outlive it.
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "daemon/site_config.h"
#include "daemon/trainer_algorithm.h"
#include "daemon/trainer_protocol.h"
#include "gossip/mix_channel.h"

namespace meridian::daemon {

struct AttachedContext {
  const SiteSettings& settings;
  std::span<float> parameters;  // (n) in the shared segment; the trainer's initial values when built
  std::span<float> gradients;   // (n) in the shared segment
  gossip::MixChannel& channel;
  // Asks the trainer for its current parameters in the segment (waits for them); throws what the
  // channel throws. The trainer side calls it only when its rule reads the parameters.
  std::function<void()> pull;
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
// Where the exchange with the trainer sits in its step (see above), for settings
// attached_support_problem() accepts.
TrainerHook attached_hook(const SiteSettings& settings);
// The trainer side of `settings`' algorithm for an attached trainer, for settings
// attached_support_problem() accepts (throws error::InternalError otherwise).
std::unique_ptr<AttachedTrainer> make_attached_trainer(const AttachedContext& context);

}  // namespace meridian::daemon
