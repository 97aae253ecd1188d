#include "daemon/attached/attached_session.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include <spdlog/spdlog.h>

namespace meridian::daemon {
namespace {

// How long a trainer that attaches again may take to answer the welcome.
constexpr std::chrono::seconds kWelcomeAnswer{30};

// The index of the first NaN or Inf in `values`, or nullopt.
std::optional<std::size_t> first_non_finite(std::span<const float> values) {
  for (std::size_t i = 0; i < values.size(); ++i)
    if (!std::isfinite(values[i])) return i;
  return std::nullopt;
}

}  // namespace

AttachedSession::AttachedSession(std::filesystem::path socket, std::string site, std::string algorithm,
                                 TrainerHook hook, TrainerChannel::OnRefusal on_refusal)
    : channel_(std::move(socket), on_refusal),
      on_refusal_(std::move(on_refusal)),
      site_(std::move(site)),
      algorithm_(std::move(algorithm)),
      hook_(hook) {}

std::span<float> AttachedSession::parameters() { return segment_->floats().first(model_->parameters); }
std::span<float> AttachedSession::gradients() { return segment_->floats().subspan(model_->parameters); }

void AttachedSession::lose(TrainerRefusal cause, const std::string& message) {
  if (channel_.attached()) {
    try {
      channel_.send(encode_error(message, true));
    } catch (const TrainerChannelError&) {
      // Gone already: the refusal is counted and logged all the same.
    }
  }
  channel_.detach();
  if (on_refusal_) on_refusal_(cause, message);
  throw AttachedTrainerLost("the attached trainer: " + message);
}

std::optional<TrainerMessage> AttachedSession::receive(Clock::duration silence, const StopCheck& stopped) {
  const auto got = channel_.receive(Clock::now() + silence, stopped);
  switch (got.kind) {
    case TrainerChannel::Received::Kind::kStopped: return std::nullopt;
    case TrainerChannel::Received::Kind::kTimeout:
      lose(TrainerRefusal::kSilent,
           "sent nothing for " + std::to_string(std::chrono::duration_cast<std::chrono::seconds>(silence).count()) +
               " s (the deadline is --round-timeout)");
    case TrainerChannel::Received::Kind::kClosed:
      lose(TrainerRefusal::kDisconnected, "closed the channel before the run's end");
    case TrainerChannel::Received::Kind::kPacket: break;
  }
  try {
    return decode_trainer_message(got.packet);
  } catch (const TrainerProtocolError& e) {
    lose(TrainerRefusal::kBadMessage, std::string("sent a bad message: ") + e.what());
  }
}

bool AttachedSession::attach(Clock::time_point deadline, const StopCheck& stopped) {
  switch (accept_trainer(deadline, stopped)) {
    case Accepted::kAttached: return true;
    case Accepted::kStopped: return false;
    case Accepted::kTimeout: break;
  }
  throw AttachedTrainerLost("no trainer attached to " + channel_.path().string() +
                            " within --join-timeout; start the training script with MERIDIAN_RUN_DIR set to "
                            "this site's run directory (docs/pytorch.md)");
}

bool AttachedSession::reattach(Clock::time_point deadline, const StopCheck& stopped) {
  return accept_trainer(deadline, stopped) == Accepted::kAttached;
}

AttachedSession::Accepted AttachedSession::accept_trainer(Clock::time_point deadline, const StopCheck& stopped) {
  const bool again = model_.has_value();
  for (;;) {
    const auto got = channel_.receive(deadline, stopped);
    if (got.kind == TrainerChannel::Received::Kind::kStopped) return Accepted::kStopped;
    if (got.kind == TrainerChannel::Received::Kind::kTimeout) return Accepted::kTimeout;
    if (got.kind == TrainerChannel::Received::Kind::kClosed) continue;  // left before its hello
    // A trainer whose hello is refused is detached; the site waits for the next one.
    const auto refuse = [&](TrainerRefusal cause, const std::string& message) {
      try {
        channel_.send(encode_error(message, true));
      } catch (const TrainerChannelError&) {
      }
      channel_.detach();
      if (on_refusal_) on_refusal_(cause, message);
    };
    TrainerMessage hello;
    try {
      hello = decode_trainer_message(got.packet);
    } catch (const TrainerProtocolError& e) {
      refuse(TrainerRefusal::kBadMessage, std::string("bad hello: ") + e.what());
      continue;
    }
    if (hello.op != TrainerOp::kHello) {
      refuse(TrainerRefusal::kBadMessage, "the first message must be a hello");
      continue;
    }
    if (hello.steps == 0) {
      refuse(TrainerRefusal::kModel, "the trainer declared 0 steps to run");
      continue;
    }
    AttachedModel declared;
    try {
      declared = attached_model_of(std::move(hello.tensors));
    } catch (const AttachedModelError& e) {
      refuse(TrainerRefusal::kModel, e.what());
      continue;
    }
    if (again && declared.fingerprint() != model_->fingerprint()) {
      // The federation agreed on the first trainer's model; a trainer that comes back must bring it.
      refuse(TrainerRefusal::kModel, "this site trains " + model_->summary() + " and the trainer declared " +
                                         declared.summary() + "; attach the same model again");
      continue;
    }
    if (!again) {
      model_ = std::move(declared);
      steps_ = hello.steps;
      // Parameters and gradients, n floats each (at most 2^33 floats: no overflow).
      segment_ = SharedSegment::create("meridian-" + site_, 2 * model_->parameters);
    } else {
      // The segment holds this site's state; the trainer's copy-in below must not replace it. One
      // model-sized copy per re-attachment, allocated once.
      held_.assign(parameters().begin(), parameters().end());
    }
    channel_.send(encode_welcome(site_, algorithm_, hook_, model_->parameters), segment_->fd());
    // The trainer's initial parameters follow at once: a fresh run starts from them.
    // A trainer answers the welcome at once; a re-attaching one, polled for between rounds, within
    // a bound of its own.
    const auto initial =
        channel_.receive(again ? std::max(deadline, Clock::now() + kWelcomeAnswer) : deadline, stopped);
    if (initial.kind == TrainerChannel::Received::Kind::kStopped) return Accepted::kStopped;
    std::optional<TrainerMessage> pulled;
    try {
      if (initial.kind == TrainerChannel::Received::Kind::kPacket) pulled = decode_trainer_message(initial.packet);
    } catch (const TrainerProtocolError&) {
    }
    const auto restore_held = [&] {
      if (again) std::copy(held_.begin(), held_.end(), parameters().begin());
    };
    if (!pulled || pulled->op != TrainerOp::kPulled) {
      refuse(TrainerRefusal::kBadMessage, "the welcome must be answered with the initial parameters (\"pulled\")");
      restore_held();
      if (!again) segment_.reset();
      continue;
    }
    if (again) {
      restore_held();
      spdlog::info("trainer attached again (pid {}): it continues from this site's parameters",
                   channel_.trainer_pid());
      return Accepted::kAttached;
    }
    if (const auto at = first_non_finite(parameters())) {
      refuse(TrainerRefusal::kNonFinite, "initial parameter " + std::to_string(*at) + " is NaN or Inf");
      segment_.reset();
      continue;
    }
    spdlog::info("trainer attached (pid {}): {}, {} steps", channel_.trainer_pid(), model_->summary(), steps_);
    return Accepted::kAttached;
  }
}

void AttachedSession::send(const std::string& packet, int fd) {
  try {
    channel_.send(packet, fd);
  } catch (const TrainerChannelError& e) {
    lose(TrainerRefusal::kDisconnected, e.what());
  }
}

void AttachedSession::start(std::uint64_t steps, bool restore) { send(encode_start(steps, restore)); }

std::optional<AttachedSession::Step> AttachedSession::next_step(Clock::duration silence,
                                                                const StopCheck& stopped) {
  for (;;) {
    const auto m = receive(silence, stopped);
    if (!m) return std::nullopt;
    if (m->op == TrainerOp::kBye) {
      bye_ = true;
      return std::nullopt;
    }
    if (m->op != TrainerOp::kStep) lose(TrainerRefusal::kBadMessage, "expected a step");
    if (hook_ != TrainerHook::kParameters) {
      if (const auto at = first_non_finite(gradients())) {
        // Refused before anything reads it: the site's state and the federation never see it. The
        // trainer may skip the batch and send the step again.
        const std::string message = "step " + std::to_string(m->step) + ": gradient element " + std::to_string(*at) +
                                    " is " + (std::isnan(gradients()[*at]) ? "NaN" : "Inf") +
                                    "; the step is refused (skip the batch, or lower the learning rate)";
        send(encode_error(message, false));
        if (on_refusal_) on_refusal_(TrainerRefusal::kNonFinite, message);
        continue;
      }
    }
    return Step{m->step, m->loss};
  }
}

void AttachedSession::pull(Clock::duration silence) {
  send(encode_pull());
  take_final_parameters(silence);
}

void AttachedSession::take_final_parameters(Clock::duration silence) {
  // A stop does not interrupt this: the trainer answers within the deadline or is lost.
  auto m = receive(silence, [] { return false; });
  // A step the trainer sent while the site was stopping crossed the request: the answer follows it.
  while (m && m->op == TrainerOp::kStep) m = receive(silence, [] { return false; });
  if (!m || m->op != TrainerOp::kPulled) lose(TrainerRefusal::kBadMessage, "expected the parameters (\"pulled\")");
  if (const auto at = first_non_finite(parameters()))
    lose(TrainerRefusal::kNonFinite, "parameter element " + std::to_string(*at) + " is NaN or Inf");
}

void AttachedSession::done(bool gradients, bool parameters, bool finished) {
  send(encode_done(gradients, parameters, finished));
}

}  // namespace meridian::daemon
