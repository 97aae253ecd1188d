// Secure aggregation without a server: the exact mean over a round's members in which no site sees
// another site's values, only their sum. Each member encodes its values in fixed point
// (privacy/fixed_point.h), adds one pairwise mask per other member (privacy/pairwise_mask.h: lower
// name adds, higher subtracts) and sends that masked share to every other member, as one
// kCompressedShare message whose opaque payload (phase peer::kOpaquePayloadPhase) holds each lane in 6
// bytes (privacy/packed_share.h). Every member sums the n shares modulo 2^48, where the masks cancel,
// and divides by n: every member holds the same bits, equal to the unmasked fixed-point mean.
//
// What each site learns: its own values and the mean. A single share is its values plus at least one
// mask the receiver does not know (n >= 3), so it is uniform and independent of the values; with n = 2
// the mean itself gives the other's values away, as any mean would. Nothing unmasked is ever sent:
// every round of a secure site, including the exact re-averages, runs here.
//
// Rounds and faults, as the float mixers (gossip/average_mixer.h, gossip/group_mixer.h): a round that
// cannot finish by its deadline, or whose missing member a newer announced view leaves out, is
// abandoned (counted). With Abandon::kRedo (the whole view: allreduce, dts, diloco, re-averages) it is
// redone in the newer view; the masks depend on the view, so the redo's masks are fresh and the dead
// site's masks are never reconstructed or needed. With Abandon::kSkip (dsync's groups) the site keeps
// its own values for the step. A redo that a peer has already moved past is skipped likewise.
//
// Refused shares, counted by cause and never summed: malformed (a length, slice or padding that is not
// a packed share of the tensor), stale (a masked share of a round this site has finished or
// abandoned), unmasked (any other mixer message: a secure site takes no float shares). Replays and
// truncated frames are refused earlier by the transport (peer/message_validator.h).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "gossip/inbox.h"
#include "gossip/mixer.h"
#include "gossip/redo_view.h"
#include "privacy/fixed_point.h"
#include "privacy/pair_keys.h"
#include "privacy/pairwise_mask.h"
#include "privacy/secure_aggregation_counters.h"

namespace meridian::privacy {

// The mask domains of the daemon's masked collectives (privacy/pairwise_mask.h): the whole view, and
// dsync's groups.
inline constexpr std::uint32_t kWholeViewDomain = 0;
inline constexpr std::uint32_t kGroupDomain = 1;

// Adds this site's pairwise masks for `round` to `lanes`: for every other member of `group` (sorted
// names, `self` among them), the pair's stream, added when `self` sorts first, subtracted otherwise.
void mask_share(const std::string& self, const std::vector<std::string>& group, PairKeys& keys, const MaskRound& round,
                std::span<std::uint64_t> lanes);

// mask_share() of a copy of `lanes`, written to `masked` (lanes.size()) and packed
// (privacy/packed_share.h) into each of `packed` (packed_words(lanes.size()) words each: one per
// receiver), a block at a time (privacy/pairwise_mask.h's RoundMasks) so that each block and its
// keystreams are read and written while they are in cache. Throws error::InternalError when sizes differ.
void mask_and_pack(const std::string& self, const std::vector<std::string>& group, PairKeys& keys,
                   const MaskRound& round, std::span<const std::uint64_t> lanes, std::span<std::uint64_t> masked,
                   std::span<const std::span<float>> packed);

// Thread-safety: none (communication thread only). Does not own the inbox, the keys or the counters,
// which must outlive it.
class SecureMeanMixer final : public gossip::Mixer {
 public:
  // The members (sorted, this site's name included) averaged with `rank` at `step`.
  using GroupOf = std::function<std::vector<std::string>(const peer::View& view, std::size_t rank, std::uint64_t step)>;
  enum class Abandon { kRedo, kSkip };

  // `domain` tells apart collectives that could share a (view, step, tag) (privacy/pairwise_mask.h).
  SecureMeanMixer(gossip::Inbox& inbox, PairKeys& keys, SecureAggregationCounters& counters,
                  gossip::RoundTimeouts timeouts, GroupOf group_of, std::uint32_t domain, Abandon abandon);

  // The whole view, redone in the next view when a member fails: allreduce, dts, diloco, re-averages.
  static GroupOf whole_view();

  // Replaces `data` by the fixed-point mean over the step's group (`weight` unchanged). A site alone
  // in its group keeps its values. Throws MixError like gossip::AverageMixer (kRedo), and for a group
  // larger than kMaxSites.
  gossip::MixReport mix(std::uint64_t step, gossip::RoundTag tag, std::span<float> data, double& weight) override;

 private:
  enum class Wait { kGot, kAbandon };
  // Takes peer `from`'s well-formed share of the round into received_; kAbandon when it cannot come.
  Wait receive_share(const peer::View& view, const std::vector<std::string>& group, const std::string& from,
                     std::uint64_t step, std::uint32_t tag, std::size_t n, bool redoing,
                     gossip::Clock::time_point deadline);
  // Gives the payloads of received_ back to the transport.
  void recycle_received();
  // Whether a member of `group` sent this tag's share of a later step in a view no newer than `attempt`.
  bool peer_moved_past(const peer::View& attempt, const std::vector<std::string>& group, std::uint64_t step,
                       std::uint32_t tag);
  void discard_stale(std::uint64_t step, std::uint32_t tag);

  gossip::Inbox& inbox_;
  PairKeys& keys_;
  SecureAggregationCounters& counters_;
  gossip::RoundTimeouts timeouts_;
  GroupOf group_of_;
  std::uint32_t domain_;
  Abandon abandon_;
  gossip::RedoView redo_;
  std::vector<std::uint64_t> lanes_;             // (n) this site's encoded values
  std::vector<std::uint64_t> share_;             // (n) ... plus its masks
  std::vector<std::vector<float>> received_;     // the other members' packed shares of this attempt
};

}  // namespace meridian::privacy
