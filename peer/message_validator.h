// Semantic checks on a decoded header before anything reaches a model: model fingerprint, tensor
// length, push-sum weight range, round window and replay. Structure and size caps are checked earlier
// by decode_header (peer/wire_codec.h); finite values while the payload is copied (peer/reassembler.h).
//
// Thread-safety: none; the transport's I/O thread owns it.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>

#include "peer/wire_codec.h"

namespace meridian::peer {

struct ValidationPolicy {
  std::uint64_t model_fingerprint = 0;
  // Elements of the tensors mixers exchange (the model's parameter count); 0 accepts any length up to
  // the wire cap.
  std::uint64_t model_elements = 0;
  // A mixer tensor may pack up to this many model-sized vectors back to back (dts with momentum and
  // P > 1 averages its window displacement and window momentum together); its length must then be
  // model_elements × k for some k in [1, max_model_multiple].
  std::uint32_t max_model_multiple = 1;
  // The model's normalization statistics (models::Model::state()), which some tensors carry after
  // their model-sized vectors: a length of model_elements × k + state_elements is accepted too. 0: none.
  std::uint64_t state_elements = 0;
  // Push-sum weight shares must be finite and in [min_weight, max_weight].
  double min_weight = 1e-30;
  double max_weight = 1e6;
  // Accepted rounds: [current - rounds_behind, current + rounds_ahead], where current is the site's
  // own round (set_round, or the newest round it sent).
  std::uint64_t rounds_behind = 256;
  std::uint64_t rounds_ahead = 1u << 16;
};

class MessageValidator {
 public:
  explicit MessageValidator(ValidationPolicy policy) : policy_(policy) {}

  // Checks one chunk's header from `sender`. Every chunk: fingerprint. First chunk of a mixer message
  // additionally: tensor length and slice, weight (kPushSum), round window, replay. Returns the
  // rejection, or nullopt when the header may be used.
  std::optional<Rejection> check(const std::string& sender, const WireHeader& h) const;

  // Remembers an accepted mixer message so that an identical one from the same sender is rejected as
  // replayed while its round stays in the window.
  void accept(const std::string& sender, const Message& m);

  // Moves the window to `round` if it is ahead of the current one (never backwards) and forgets replay
  // records that fell out of it.
  void advance_round(std::uint64_t round);
  std::uint64_t round() const { return round_; }

  // Drops the replay records of a sender (it died or left; a restarted site starts afresh).
  void forget(const std::string& sender) { seen_.erase(sender); }

  const ValidationPolicy& policy() const { return policy_; }

 private:
  // (round, kind, view, tag, phase, offset): round first so old records are pruned from the front.
  using Key = std::tuple<std::uint64_t, int, std::uint64_t, std::uint32_t, std::uint32_t, std::uint64_t>;
  template <typename M>
  static Key key_of(const M& m) {
    return {m.round, static_cast<int>(m.kind), m.view_id, m.tag, m.phase, m.offset};
  }

  ValidationPolicy policy_;
  std::uint64_t round_ = 0;
  std::map<std::string, std::set<Key>> seen_;
};

}  // namespace meridian::peer
