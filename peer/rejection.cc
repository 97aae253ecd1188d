#include "peer/rejection.h"

#include <spdlog/spdlog.h>

#include "peer/printable_text.h"

namespace meridian::peer {

std::string_view to_string(RejectCause cause) {
  switch (cause) {
    case RejectCause::kOversized: return "oversized";
    case RejectCause::kTruncated: return "truncated";
    case RejectCause::kMalformed: return "malformed";
    case RejectCause::kVersion: return "version";
    case RejectCause::kFingerprint: return "fingerprint";
    case RejectCause::kUnknownSender: return "unknown_sender";
    case RejectCause::kUnknownKind: return "unknown_kind";
    case RejectCause::kTensorLength: return "tensor_length";
    case RejectCause::kNonFinite: return "non_finite";
    case RejectCause::kWeightRange: return "weight_range";
    case RejectCause::kRoundStale: return "round_stale";
    case RejectCause::kRoundAhead: return "round_ahead";
    case RejectCause::kReplayed: return "replayed";
    case RejectCause::kIncomplete: return "incomplete";
    case RejectCause::kTerms: return "terms";
    case RejectCause::kPlaintext: return "plaintext";
    case RejectCause::kAddress: return "address";
    case RejectCause::kStaleKey: return "stale_key";
    case RejectCause::kUnvouched: return "unvouched";
    case RejectCause::kIncarnation: return "incarnation";
    case RejectCause::kInventedMember: return "invented_member";
    case RejectCause::kStrayRefusal: return "stray_refusal";
    case RejectCause::kUnjustifiedView: return "unjustified_view";
    case RejectCause::kImplausibleRound: return "implausible_round";
    case RejectCause::kHearsayView: return "hearsay_view";
  }
  return "unknown";
}

void RejectionCounters::record(RejectCause cause, const std::string& peer, std::string_view detail) {
  counts_[static_cast<std::size_t>(cause)].fetch_add(1, std::memory_order_relaxed);
  // A peer that can choose its own name (insecure mode) could otherwise grow this set without bound;
  // past the cap we still count, we just stop logging new pairs.
  constexpr std::size_t kMaxLoggedPairs = 4096;
  constexpr std::size_t kMaxLoggedDetail = 2048;
  std::lock_guard lock(mu_);
  if (logged_.size() >= kMaxLoggedPairs) return;
  if (!logged_.emplace(cause, peer).second) return;
  // Names and details may quote what the peer sent (terms, addresses): only printable text is logged.
  spdlog::warn(
      "rejected a message from peer '{}': {} ({}); further '{}' rejections from this peer are "
      "counted, not logged",
      printable_text(peer), to_string(cause), printable_text(detail, kMaxLoggedDetail), to_string(cause));
}

std::uint64_t RejectionCounters::count(RejectCause cause) const {
  return counts_[static_cast<std::size_t>(cause)].load(std::memory_order_relaxed);
}

std::uint64_t RejectionCounters::total() const {
  std::uint64_t sum = 0;
  for (const auto& c : counts_) sum += c.load(std::memory_order_relaxed);
  return sum;
}

std::array<std::uint64_t, kRejectCauseCount> RejectionCounters::snapshot() const {
  std::array<std::uint64_t, kRejectCauseCount> out{};
  for (std::size_t i = 0; i < kRejectCauseCount; ++i) out[i] = counts_[i].load(std::memory_order_relaxed);
  return out;
}

}  // namespace meridian::peer
