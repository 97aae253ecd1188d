// The trainer side shared by the algorithms that run the configured optimizer themselves (all but
// dts, which is its own optimizer): the model, a host mirror of it for gossip/, the optimizer, and the
// checkpoint sections "optimizer" (its state) and the parameters.
//
// Thread-safety: one trainer thread. Borrows the model, which must outlive it.
#pragma once

#include <chrono>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "daemon/algorithms/algorithm.h"
#include "daemon/backend/host_mirror.h"
#include "models/optimizer.h"

namespace meridian::daemon::algorithms {

// How long the trainer waits for a mix: a round deadline, then a view change, then the redone round.
std::chrono::milliseconds mix_wait_timeout(const SiteSettings& settings);

// Throws CheckpointError when a checkpoint's `what` holds `got` values and this model needs `want`.
void check_checkpoint_size(std::size_t got, std::size_t want, const std::string& what);

class OptimizerTrainer : public TrainerAlgorithm {
 public:
  explicit OptimizerTrainer(const TrainerContext& context);

  std::span<const float> checkpoint_parameters() const override;
  std::vector<OptimizerSpan> checkpoint_state() const override;
  void restore(const Checkpoint& checkpoint) override;

 protected:
  // Restores the "optimizer" section; throws CheckpointError when it is missing or of another size.
  void restore_state(const Checkpoint& checkpoint);
  // The optimizer state as host memory: the state itself on the CPU, a fresh copy of it on a device.
  std::span<float> host_state();
  // One optimizer update at the run's `local_step` (which picks the learning rate).
  void optimizer_step(std::uint64_t local_step);

  models::Model& model_;
  mutable HostMirror mirror_;  // host views for gossip/ (the model's own buffers on the CPU)
  models::Optimizer optimizer_;
  mutable std::vector<float> state_copy_;  // (state) host copy of a device optimizer state
};

}  // namespace meridian::daemon::algorithms
