// The trainer side of an algorithm (docs/algorithms.md) behind one interface: after forward/backward left
// the local gradient in the model, step(k) applies round k's update with the algorithm's rule, handing
// snapshots to the communication thread through the MixChannel and applying what comes back. Each
// algorithm's own file under daemon/algorithms/ implements it (daemon/algorithms/algorithm.h makes it).
//
// On a backend that is not host-addressable (CUDA) the optimizer runs on the device; dsync snapshots and
// compensates through daemon/backend/backend_parameters.h, sgp keeps push-sum on the device
// (daemon/backend/backend_push_sum.h), the others work on host copies (daemon/backend/host_mirror.h). With D (τ) >= 1,
// dsync's and sgp's snapshot of step k is a pinned copy that runs alongside step k + 1's forward and
// backward pass and is handed over at the start of step(k + 1), before the optimizer update; allreduce
// and dts copy synchronously (docs/cuda.md says why). On the CPU both are the model's own buffers.
//
// Thread-safety: one trainer thread. Borrows the model and the channel, which must outlive it.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "daemon/algorithms/auto_shape.h"
#include "daemon/checkpoint/checkpoint.h"
#include "daemon/site_config.h"
#include "models/lr_schedule.h"
#include "peer/view.h"

namespace meridian::daemon {

class TrainerAlgorithm {
 public:
  virtual ~TrainerAlgorithm() = default;

  // Round k's update from model.gradients() (which it may overwrite). `local_step` counts the run's
  // steps from 0 and picks the learning rate. Throws what gossip throws (MixError on a deadline, the
  // communication side's errors).
  virtual void step(std::uint64_t k, std::uint64_t local_step) = 0;
  // Applies every outstanding mix (waiting for them; throws like step()). Called after the run's last
  // step, which every site shares.
  virtual void finish() {}
  // The same for a site stopped before the run's end, at a step of its own: starts no mix of its own
  // (no peer would join one keyed to its stop step) and applies those in flight.
  virtual void finish_stopped() { finish(); }

  // Round k's view (the one in force at k), before step(k); every site calls it for every round it
  // runs. An algorithm whose shape is chosen from the network (--delay auto, --tau auto;
  // daemon/algorithms/auto_shape.h) runs the shape the view's pace gives from round k on, which is the
  // same round on every site; what its old shape has in flight is finished as its own file says.
  // The default: nothing.
  virtual void adopt_view(std::uint64_t k, const peer::View& view) {
    (void)k;
    (void)view;
  }
  // The shape chosen from the network and the figures it came from; nullopt for a fixed shape.
  virtual std::optional<algorithms::ChosenShape> chosen_shape() const { return std::nullopt; }

  // Steps run ahead of the oldest mix still expected.
  virtual std::uint64_t staleness() const { return 0; }
  // Rounds abandoned at their deadline and redone.
  virtual std::uint64_t rounds_abandoned() const { return 0; }

  // What a checkpoint stores: parameters (sgp: the numerator x), optimizer state, push-sum weight and
  // its running average (sgp's step scale, gossip/push_sum_step_scale.h).
  virtual std::span<const float> checkpoint_parameters() const = 0;
  virtual std::vector<OptimizerSpan> checkpoint_state() const = 0;
  virtual double push_sum_weight() const { return 1.0; }
  virtual double push_sum_weight_average() const { return 1.0; }
  // Restores what checkpoint_*() saved; call before the first step. Throws CheckpointError when a
  // size does not match.
  virtual void restore(const Checkpoint& checkpoint) = 0;
};

// The learning-rate schedule of `settings` over a run of `total_steps` with `steps_per_epoch`.
models::ScheduleConfig schedule_of(const SiteSettings& settings, std::uint64_t steps_per_epoch,
                                   std::uint64_t total_steps);

}  // namespace meridian::daemon
