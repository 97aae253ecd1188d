#include "peer/message_validator.h"

#include <algorithm>

#include <cmath>
#include <cstdio>

#include "peer/opaque_payload.h"

namespace meridian::peer {

namespace {
std::string hex(std::uint64_t v) {
  char buf[19];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}
}  // namespace

std::optional<Rejection> MessageValidator::check(const std::string& sender, const WireHeader& h) const {
  if (h.model_fingerprint != policy_.model_fingerprint)
    return Rejection{RejectCause::kFingerprint,
                     "model fingerprint " + hex(h.model_fingerprint) + ", ours is " + hex(policy_.model_fingerprint)};
  if (!is_mixer_kind(h.kind) || h.chunk_index != 0) return std::nullopt;

  const auto whole_models = [&](std::uint64_t total) {
    return total % policy_.model_elements == 0 && total / policy_.model_elements >= 1 &&
           total / policy_.model_elements <= std::max<std::uint32_t>(1, policy_.max_model_multiple);
  };
  const bool fits = policy_.model_elements != 0 &&
                    (whole_models(h.total) || (policy_.state_elements != 0 && h.total > policy_.state_elements &&
                                               whole_models(h.total - policy_.state_elements)));
  if (policy_.model_elements != 0 && !fits)
    return Rejection{
        RejectCause::kTensorLength,
        "tensor of " + std::to_string(h.total) + " elements, the model has " + std::to_string(policy_.model_elements) +
            (policy_.state_elements != 0
                 ? " parameters and " + std::to_string(policy_.state_elements) + " normalization statistics"
                 : "")};
  if (has_opaque_payload(h.kind, h.phase)) {
    // Bytes, not floats: the whole tensor, in exactly the words its bytes fill.
    if (h.offset != 0 || h.total > kMaxOpaqueElements || h.payload_elements != opaque_words(h.total))
      return Rejection{RejectCause::kTensorLength, "opaque payload of " + std::to_string(h.payload_elements) +
                                                       " words at offset " + std::to_string(h.offset) +
                                                       " for a tensor of " + std::to_string(h.total)};
  } else if (h.offset > h.total || h.payload_elements > h.total - h.offset)
    return Rejection{RejectCause::kTensorLength, "slice [" + std::to_string(h.offset) + ", +" +
                                                     std::to_string(h.payload_elements) +
                                                     ") lies outside a tensor of " + std::to_string(h.total)};
  if (h.kind == MessageKind::kPushSum) {
    if (!std::isfinite(h.weight)) return Rejection{RejectCause::kNonFinite, "push-sum weight is not finite"};
    if (h.weight < policy_.min_weight || h.weight > policy_.max_weight)
      return Rejection{RejectCause::kWeightRange, "push-sum weight " + std::to_string(h.weight) + " outside [" +
                                                      std::to_string(policy_.min_weight) + ", " +
                                                      std::to_string(policy_.max_weight) + "]"};
  }
  if (h.round + policy_.rounds_behind < round_)
    return Rejection{RejectCause::kRoundStale, "round " + std::to_string(h.round) +
                                                   " is older than the window (current round " +
                                                   std::to_string(round_) + ")"};
  if (h.round > round_ + policy_.rounds_ahead)
    return Rejection{
        RejectCause::kRoundAhead,
        "round " + std::to_string(h.round) + " is beyond the window (current round " + std::to_string(round_) + ")"};
  if (auto it = seen_.find(sender); it != seen_.end() && it->second.contains(key_of(h)))
    return Rejection{RejectCause::kReplayed, "round " + std::to_string(h.round) + " tag " + std::to_string(h.tag) +
                                                 " phase " + std::to_string(h.phase) + " offset " +
                                                 std::to_string(h.offset) + " already received"};
  return std::nullopt;
}

void MessageValidator::accept(const std::string& sender, const Message& m) {
  if (!is_mixer_kind(m.kind)) return;
  auto& keys = seen_[sender];
  keys.insert(key_of(m));
  // A member could send endless distinct valid keys inside the window; forget the oldest rounds
  // first so memory stays bounded (a replay that old is then caught by the round window soon after).
  constexpr std::size_t kMaxKeysPerSender = 1u << 16;
  while (keys.size() > kMaxKeysPerSender) keys.erase(keys.begin());
}

void MessageValidator::advance_round(std::uint64_t round) {
  if (round <= round_) return;
  round_ = round;
  if (round_ < policy_.rounds_behind) return;
  const Key floor{round_ - policy_.rounds_behind, 0, 0, 0, 0, 0};
  for (auto& [sender, keys] : seen_) keys.erase(keys.begin(), keys.lower_bound(floor));
}

}  // namespace meridian::peer
