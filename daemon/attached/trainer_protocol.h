// What a site and its attached trainer (daemon/attached/attached_trainer.h) say over the trainer channel
// (daemon/attached/trainer_channel.h), as plain structs, and their encoding: one small JSON object per packet.
// The tensors themselves never travel here; they are in the shared segment (daemon/attached/shared_segment.h).
//
//   trainer → site
//     {"op": "hello", "version": 1, "steps": N, "tensors": [{"name": .., "shape": [..], "dtype": ..}, ..]}
//     {"op": "step", "step": I, "loss": L}   the trainer's step I (0-based) is in the segment, as the
//                                            welcome's hook says (gradients before the trainer's
//                                            optimizer step, parameters after it, gradients in place
//                                            of it for "update"); loss may be null
//     {"op": "pulled"}                       the parameters are in the segment, as asked
//     {"op": "bye"}                          the trainer stops before the run's end
//   site → trainer
//     {"op": "welcome", "version": 1, "site": .., "algorithm": .., "hook": "gradients" | "parameters" | "update",
//      "parameters": N}                      with the segment's descriptor: parameters at float 0,
//                                            gradients at float N
//     {"op": "start", "steps": S, "restore": bool}   training starts; S steps to run; restore: copy the
//                                            segment's parameters into the model first
//     {"op": "pull"}                         copy the parameters into the segment, then say "pulled"
//     {"op": "done", "gradients": bool, "parameters": bool, "finished": bool}   the step is through:
//                                            copy back what is true; finished: the run has ended
//     {"op": "error", "error": "..", "fatal": bool}   the last message was refused (fatal: the site
//                                            closes the channel)
// The JSON library stays inside trainer_protocol.cc.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "daemon/attached/attached_model.h"
#include "error/error.h"

namespace meridian::daemon {

inline constexpr int kTrainerProtocolVersion = 1;

// A packet that is not one of the trainer's messages.
class TrainerProtocolError : public error::PeerError {
 public:
  using error::PeerError::PeerError;
};

enum class TrainerOp { kHello, kStep, kPulled, kBye };

struct TrainerMessage {
  TrainerOp op = TrainerOp::kStep;
  // hello
  std::vector<AttachedTensor> tensors;  // element counts not yet filled in (attached_model_of does)
  std::uint64_t steps = 0;
  // step
  std::uint64_t step = 0;
  std::optional<double> loss;
};

// Throws TrainerProtocolError naming what is wrong (not JSON, unknown op, a field missing or of the
// wrong type, another protocol version).
TrainerMessage decode_trainer_message(const std::string& text);

// Where the exchange sits in the trainer's step: gradients before its optimizer step (in the
// segment with the step message), after it (parameters pulled when the site asks), or in its place:
// the gradients in the segment with the step message, and the site's update of the parameters back,
// for an algorithm that is its own optimizer (dts); the trainer's optimizer does not step.
enum class TrainerHook { kGradients, kParameters, kUpdate };
const char* to_string(TrainerHook hook);

std::string encode_welcome(const std::string& site, const std::string& algorithm, TrainerHook hook,
                           std::size_t parameters);
std::string encode_start(std::uint64_t steps, bool restore);
std::string encode_pull();
std::string encode_done(bool gradients, bool parameters, bool finished);
std::string encode_error(const std::string& error, bool fatal);

}  // namespace meridian::daemon
