// Why an incoming message was rejected, and the counters that record it. Every rejection is counted by
// cause (the daemon exports these as metrics) and logged once per (cause, peer) so a hostile or broken
// peer cannot flood the log.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <utility>

namespace meridian::peer {

enum class RejectCause : std::uint8_t {
  kOversized,      // header or payload above the configured caps
  kTruncated,      // frames missing, or a payload frame shorter than its header says
  kMalformed,      // not a well-formed header, inconsistent chunk fields, extra frames
  kVersion,        // protocol version differs from ours
  kFingerprint,    // model fingerprint differs from ours
  kUnknownSender,  // sender is not a current member (or not in the roster)
  kUnknownKind,    // a kind this site does not handle
  kTensorLength,   // tensor length differs from the model's, or a slice outside the tensor
  kNonFinite,      // NaN or infinity in the payload or the weight
  kWeightRange,    // push-sum weight outside the configured range
  kRoundStale,     // round older than the accepted window
  kRoundAhead,     // round further ahead than the accepted window
  kReplayed,       // the same message (sender, kind, view, round, tag, phase, offset) seen before
  kIncomplete,     // a chunked message whose chunks did not all arrive in order; dropped as a whole
  kTerms,          // a hello whose federation terms (model, algorithm, ...) differ from ours: refused
  kPlaintext,      // a connection without CURVE to a secure site (its handshake failed; one per connection)
  kAddress,        // an announced address that is not tcp://host:port, or one that cannot be dialed
  kStaleKey,       // a message on a connection whose key the roster no longer lists (removed, or replaced)

  // Membership (peer/membership.h): another site's record of a member (alive, dead, left, its
  // incarnation), which only that member may vouch for.
  kUnvouched,
  // An incarnation step a site may not take: more than one without a hello, or above this site's own.
  kIncarnation,
  // A view or record naming a site outside this site's roster.
  kInventedMember,
  // A refusal from a site this one does not join through (only those decide that it is not admitted).
  kStrayRefusal,
  // A proposed view that leaves out a member this site itself still hears (its own evidence says it
  // is alive): held back until this site's own evidence agrees.
  kUnjustifiedView,
  // A round (in a hello, heartbeat, member list or view) further ahead than this site's own rounds and
  // the rounds its members report make plausible.
  kImplausibleRound,
  // A proposed view listing a site this one has not heard from (taken on another site's word alone),
  // beyond one such view per interval at a site that runs rounds: held back until that site is heard
  // from or the interval has passed.
  kHearsayView,
};
inline constexpr std::size_t kRejectCauseCount = 25;
// Counters are indexed by cause: a cause added after the last one must move this count too.
static_assert(static_cast<std::size_t>(RejectCause::kHearsayView) + 1 == kRejectCauseCount);

// Stable snake_case name of a cause, used in logs and metric labels (e.g. "non_finite").
std::string_view to_string(RejectCause cause);

// Thread-safe: record() may be called from the I/O thread while others read counts.
class RejectionCounters {
 public:
  // Counts one rejection of a message from `peer`; logs a warning the first time this (cause, peer)
  // pair is seen (up to a bounded number of distinct pairs), with `detail` naming the problem.
  void record(RejectCause cause, const std::string& peer, std::string_view detail);

  std::uint64_t count(RejectCause cause) const;
  std::uint64_t total() const;
  std::array<std::uint64_t, kRejectCauseCount> snapshot() const;

 private:
  std::array<std::atomic<std::uint64_t>, kRejectCauseCount> counts_{};
  std::mutex mu_;
  std::set<std::pair<RejectCause, std::string>> logged_;
};

}  // namespace meridian::peer
