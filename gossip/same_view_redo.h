// Redoing a round in the view it failed in, so that every site ends it with the same bits.
//
// When a round is abandoned and no newer view comes, nobody was found dead: a link dropped for less
// than the heartbeat timeout and lost some of the round's messages, or a member was slower than the
// deadline. Some members may have completed the round before the others abandoned it (the loss hit the
// end of a ring's all-gather, or only one direction of a direct exchange). Two things make a redo in the
// same view end with the same bits everywhere:
//
// - Attempts. Attempt a of a round carries tag `attempt_tag(base, a)`: the attempt in the tag's upper
//   half gives every attempt its own replay identity (the transport refuses a second copy of a piece,
//   peer/message_validator.h), so a redo sends every piece again and every member takes it. Every site
//   derives the attempt the same way: one more than the attempt it abandoned, or the highest attempt a
//   member has already sent mail of that round under, whichever is larger; a site that sees a member on
//   a higher attempt gives its own up at once and follows.
// - Results. A site that completed a round holds its result; a member that abandoned it asks every
//   member for it (a request message, one float), and a holder answers with the result (one message of
//   the round's length). The ring's sums follow a fixed order and the direct exchange sums in rank
//   order, so the held result has the bits a redo would give; the asker takes it as its own.
//
// Only the last round a mixer completed is held: a member that still lacks a round blocks every later
// round of the view, so no holder is more than one round ahead of an asker.
//
// Thread-safety: none (communication thread only). Does not own the inbox, which must outlive it.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "gossip/inbox.h"
#include "gossip/round.h"
#include "peer/message.h"

namespace meridian::gossip {

// The wire tag of attempt `attempt` of a round whose own tag is `base` (a RoundTag value), and back.
constexpr std::uint32_t attempt_tag(std::uint32_t base, std::uint32_t attempt) { return base | attempt << 16; }
constexpr std::uint32_t base_tag(std::uint32_t tag) { return tag & 0xFFFFu; }
constexpr std::uint32_t attempt_of(std::uint32_t tag) { return tag >> 16; }

class SameViewRedo {
 public:
  // Phases of the request and the result, above every phase a collective uses for its own pieces.
  static constexpr std::uint32_t kRequestPhase = 0xFFFF'FFF0u;
  static constexpr std::uint32_t kResultPhase = 0xFFFF'FFF1u;
  // Attempts of one round in one view; past the last, a site keeps its own values for the step.
  static constexpr std::uint32_t kMaxAttempts = 8;

  // `kind`: the message kind of the collective whose rounds this redoes (its requests and results
  // travel as that kind).
  SameViewRedo(Inbox& inbox, peer::MessageKind kind) : inbox_(inbox), kind_(kind) {}

  // Whether `m` is a request or a result rather than a piece of a collective.
  static bool is_redo_message(const peer::Message& m) { return m.phase >= kRequestPhase; }

  // Records `result` as this site's result of round (view_id, step, base tag) among `group`, replacing
  // the round held before.
  void hold(const Round& round, const std::vector<std::string>& group, std::span<const float> result);

  // Answers every request for the held round in the inbox's stash and consumes them (it does not
  // poll the transport: has_result and highest_attempt do). Requests of other rounds stay in the
  // inbox. Throws what Transport::send throws.
  void serve();

  // Sends a request for round (view_id, step, base tag) under attempt `attempt` to every member of
  // `group` but this site; `elements` is the round's tensor length.
  void ask(const std::vector<std::string>& group, const Round& round, std::uint32_t attempt, std::size_t elements);

  // Takes a result of round (step, base tag) from a member of `group` that completed it in one of the
  // views `views` (this site's attempts of the round), waiting until `deadline`, and copies it into
  // `data` (its length must match). Returns the view the result was completed in, or nullopt.
  std::optional<std::uint64_t> take_result(std::uint64_t step, std::uint32_t base, const std::vector<std::uint64_t>& views,
                                           const std::vector<std::string>& group, std::span<float> data,
                                           Clock::time_point deadline);

  // Whether such a result is in the inbox now (it stays there). Moves what the transport holds now
  // into the stash.
  bool has_result(std::uint64_t step, std::uint32_t base, const std::vector<std::uint64_t>& views,
                  const std::vector<std::string>& group);

  // The highest attempt under which a member of `group` has sent mail of round (view_id, step, base
  // tag) that is in the inbox; 0 when none. Moves what the transport holds now into the stash.
  std::uint32_t highest_attempt(const Round& round, const std::vector<std::string>& group);

 private:
  struct Held {
    Round round;  // base tag
    std::vector<std::string> group;
    std::vector<float> result;
  };

  bool is_result(const peer::Message& m, std::uint64_t step, std::uint32_t base, const std::vector<std::uint64_t>& views,
                 const std::vector<std::string>& group) const;

  Inbox& inbox_;
  peer::MessageKind kind_;
  std::optional<Held> held_;
};

}  // namespace meridian::gossip
