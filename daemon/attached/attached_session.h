// One site's attachment to its trainer process (daemon/attached/attached_trainer.h): the channel
// (daemon/attached/trainer_channel.h), the model the trainer declared (daemon/attached/attached_model.h) and the shared
// segment sized for it (daemon/attached/shared_segment.h), with the protocol's exchanges
// (daemon/attached/trainer_protocol.h) as calls:
//   attach()     waits for a trainer's hello, refuses a declaration that does not fit, makes the
//                segment, sends the welcome with its descriptor and takes the trainer's initial
//                parameters;
//   reattach()   after the trainer was lost: the same for a trainer started again, which must declare
//                the same model; the segment and the parameters in it (the site's) are kept;
//   start()      training begins (after the federation agreed on the run);
//   next_step()  waits for the trainer's next step; refuses (and counts) a step whose gradients hold
//                NaN or Inf, which the trainer may send again;
//   pull()       asks for the current parameters;
//   done()       the step is through.
// A trainer that goes silent past the deadline, closes the channel, or breaks the protocol is
// counted and ends the attachment with AttachedTrainerLost; nothing it sent reaches the federation.
// The segment stays, so that a trainer may attach again (reattach()).
//
// Ownership: owns the channel and the segment. Thread-safety: one thread (the site's trainer thread).
#pragma once

#include <chrono>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "daemon/attached/attached_model.h"
#include "daemon/attached/shared_segment.h"
#include "daemon/attached/trainer_channel.h"
#include "daemon/attached/trainer_protocol.h"
#include "error/error.h"

namespace meridian::daemon {

// The trainer is gone, silent or broke the protocol: the site cannot go on training.
class AttachedTrainerLost : public error::UserError {
 public:
  using error::UserError::UserError;
};

class AttachedSession {
 public:
  using Clock = std::chrono::steady_clock;

  // What the welcome tells the trainer; `on_refusal` counts every refusal.
  AttachedSession(std::filesystem::path socket, std::string site, std::string algorithm, TrainerHook hook,
                  TrainerChannel::OnRefusal on_refusal);

  // Waits (until `deadline`) for a trainer whose hello declares a model that fits, refusing the others.
  // Returns false when `stopped()` turned true first. Throws AttachedTrainerLost when none attached in time.
  bool attach(Clock::time_point deadline, const StopCheck& stopped);
  // After attach() and the loss of its trainer: waits (until `deadline`; a past one only looks) for a
  // trainer that declares the same model, refusing others (counted), and hands it the segment with
  // the parameters it holds, which the trainer then starts from (start() with restore). Returns false
  // at the deadline or when `stopped()` turned true.
  bool reattach(Clock::time_point deadline, const StopCheck& stopped);
  bool has_trainer() const { return channel_.attached(); }

  const AttachedModel& model() const { return *model_; }
  std::uint64_t steps() const { return steps_; }
  std::span<float> parameters();
  std::span<float> gradients();
  pid_t trainer_pid() const { return channel_.trainer_pid(); }

  // Each throws AttachedTrainerLost (counted) when the trainer is gone.
  void start(std::uint64_t steps, bool restore);

  struct Step {
    std::uint64_t step = 0;  // the trainer's step, 0-based
    std::optional<double> loss;
  };
  // The trainer's next step (nullopt: `stopped()` turned true, or the trainer said bye — see said_bye()).
  // Each message must come within `silence` of the call. Throws AttachedTrainerLost.
  std::optional<Step> next_step(Clock::duration silence, const StopCheck& stopped);
  bool said_bye() const { return bye_; }
  // The trainer's current parameters into the segment; throws AttachedTrainerLost (a trainer that
  // does not answer, or answers with NaN or Inf parameters).
  void pull(Clock::duration silence);
  // Waits for the parameters the trainer sends unasked at the run's end (the gradient hook's last
  // update happens after the last exchange).
  void take_final_parameters(Clock::duration silence);
  void done(bool gradients, bool parameters, bool finished);

 private:
  // The next packet, decoded; throws AttachedTrainerLost (counted) for silence, a closed channel or a
  // packet that is not the protocol's.
  std::optional<TrainerMessage> receive(Clock::duration silence, const StopCheck& stopped);
  void send(const std::string& packet, int fd = -1);
  [[noreturn]] void lose(TrainerRefusal cause, const std::string& message);
  enum class Accepted { kAttached, kTimeout, kStopped };
  Accepted accept_trainer(Clock::time_point deadline, const StopCheck& stopped);

  TrainerChannel channel_;
  TrainerChannel::OnRefusal on_refusal_;
  std::string site_, algorithm_;
  TrainerHook hook_;
  std::optional<AttachedModel> model_;
  std::optional<SharedSegment> segment_;
  std::uint64_t steps_ = 0;
  bool bye_ = false;
  std::vector<float> held_;  // (n) the site's parameters while a re-attaching trainer copies its own in
};

}  // namespace meridian::daemon
