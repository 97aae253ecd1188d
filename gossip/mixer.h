// The communication-thread side of an algorithm: turns a snapshot (a flat float buffer and, for
// push-sum, a weight) into its mixed value for one step. Implementations: AverageMixer (exact mean
// over the view: allreduce, dts, re-averaging), PushSumMixer (sgp), GroupMixer (dsync).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>

#include "gossip/round.h"
#include "peer/adaptive_deadline.h"

namespace meridian::gossip {

struct MixReport {
  std::uint64_t view_id = 0;  // the view the mix finally completed in
  // The view announced for the step (Transport::view_for): the same on every site for the same step,
  // even when some sites redid an abandoned round in a newer view and others did not need to (dsync's
  // groups). Re-averages after a view change key on it, so that every site runs them at the same step.
  std::uint64_t scheduled_view_id = 0;
  std::uint32_t abandoned = 0;  // rounds of this mix abandoned at their deadline and redone
  std::uint32_t missing = 0;    // push-sum shares that did not arrive in time (their mass comes later or is lost)
  // This site is not a member of the view in force for the step (the others found it dead, during a
  // partition say): it sat the mix out, `data` and `weight` unchanged, until a view takes it back.
  bool sat_out = false;
};

// Timing knobs shared by the mixers. Copies share `adaptive`.
struct RoundTimeouts {
  std::chrono::milliseconds round{30000};        // a round not finished by then is abandoned (fixed deadline)
  // How long an abandoned round waits for a newer view to redo it in before it is redone in its own
  // (gossip/redo_view.h).
  std::chrono::milliseconds view_change{60000};
  // --round-timeout auto: the deadline follows the measured mixes (peer/adaptive_deadline.h), which
  // MixServer feeds; `round` is then unused. Null: the fixed `round`.
  std::shared_ptr<peer::AdaptiveDeadline> adaptive;

  // The deadline of a round that starts now.
  std::chrono::milliseconds round_deadline() const {
    return adaptive ? std::chrono::ceil<std::chrono::milliseconds>(adaptive->deadline()) : round;
  }
};

// Thread-safety: none; every call comes from the one communication thread that owns the transport.
class Mixer {
 public:
  virtual ~Mixer() = default;

  // Mixes `data` (and `weight`) in place for training step `step`; `tag` tells apart several mixes of
  // the same step. Returns what happened. A site outside the view in force for the step sits the mix
  // out (MixReport::sat_out). Throws MixError when the mix cannot complete.
  virtual MixReport mix(std::uint64_t step, RoundTag tag, std::span<float> data, double& weight) = 0;
};

}  // namespace meridian::gossip
