#include "privacy/secure_mean_mixer.h"

#include <algorithm>

#include <spdlog/spdlog.h>

#include "error/error.h"
#include "gossip/share_message.h"
#include "peer/opaque_payload.h"
#include "privacy/packed_share.h"

namespace meridian::privacy {

namespace {

constexpr auto kKind = peer::MessageKind::kCompressedShare;
constexpr auto kPhase = peer::kOpaquePayloadPhase;

bool is_masked_share(const peer::Message& m) { return m.kind == kKind && m.phase == kPhase; }

}  // namespace

void mask_share(const std::string& self, const std::vector<std::string>& group, PairKeys& keys, const MaskRound& round,
                std::span<std::uint64_t> lanes) {
  for (const auto& other : group) {
    if (other == self) continue;
    add_pair_mask(keys.with(other), round, /*subtract=*/other < self, lanes);
  }
}

void mask_and_pack(const std::string& self, const std::vector<std::string>& group, PairKeys& keys,
                   const MaskRound& round, std::span<const std::uint64_t> lanes, std::span<std::uint64_t> masked,
                   std::span<const std::span<float>> packed) {
  const std::size_t n = lanes.size();
  error::enforce(masked.size() == n, "mask_and_pack: sizes differ");
  RoundMasks masks(self, group, keys, round);
  // Lanes and keystream of a block stay in L1 while every pair's mask is added and the block is packed
  // into every receiver's buffer, where whole-tensor passes would stream the lanes through memory once
  // per pair and copy each packed share once per receiver.
  constexpr std::size_t kBlock = RoundMasks::kBlockLanes;
  for (std::size_t begin = 0; begin < n; begin += kBlock) {
    const std::size_t count = std::min(kBlock, n - begin);
    const auto block = masked.subspan(begin, count);
    std::copy_n(lanes.data() + begin, count, block.data());
    masks.add(block, begin);
    for (const auto& words : packed) pack_lanes(block, begin, n, words);
  }
}

SecureMeanMixer::SecureMeanMixer(gossip::Inbox& inbox, PairKeys& keys, SecureAggregationCounters& counters,
                                 gossip::RoundTimeouts timeouts, GroupOf group_of, std::uint32_t domain,
                                 Abandon abandon)
    : inbox_(inbox),
      keys_(keys),
      counters_(counters),
      timeouts_(timeouts),
      group_of_(std::move(group_of)),
      domain_(domain),
      abandon_(abandon) {}

SecureMeanMixer::GroupOf SecureMeanMixer::whole_view() {
  return [](const peer::View& view, std::size_t, std::uint64_t) { return view.members; };
}

void SecureMeanMixer::discard_stale(std::uint64_t step, std::uint32_t tag) {
  // A secure site takes no float shares: any other mixer message is refused (a peer that agreed to the
  // terms never sends one). Masked shares of an older step of this tag are what a finished or abandoned
  // round left behind, or a share taken from another round: neither is ever summed.
  (void)inbox_.discard_if([&](const peer::Message& m) {
    if (!peer::is_mixer_kind(m.kind)) return false;
    if (!is_masked_share(m)) {
      ++counters_.refused_unmasked;
      return true;
    }
    if (m.tag == tag && m.round < step) {
      ++counters_.refused_stale;
      return true;
    }
    return false;
  });
}

bool SecureMeanMixer::peer_moved_past(const peer::View& attempt, const std::vector<std::string>& group,
                                      std::uint64_t step, std::uint32_t tag) {
  bool past = false;
  (void)inbox_.take(
      [&](const peer::Message& m) {
        past = past || (is_masked_share(m) && m.tag == tag && m.round > step && m.view_id <= attempt.id &&
                        std::find(group.begin(), group.end(), m.from) != group.end());
        return false;
      },
      gossip::Clock::now());
  return past;
}

void SecureMeanMixer::recycle_received() {
  for (auto& payload : received_) inbox_.transport().recycle(std::move(payload));
  received_.clear();
}

SecureMeanMixer::Wait SecureMeanMixer::receive_share(const peer::View& view, const std::vector<std::string>& group,
                                                     const std::string& from, std::uint64_t step, std::uint32_t tag,
                                                     std::size_t n, bool redoing,
                                                     gossip::Clock::time_point deadline) {
  auto mine = [&](const peer::Message& m) {
    return is_masked_share(m) && m.round == step && m.tag == tag && m.view_id == view.id && m.from == from;
  };
  for (;;) {
    const auto until = std::min(deadline, gossip::Clock::now() + std::chrono::milliseconds(100));
    auto msg = inbox_.take(mine, until);
    if (msg) {
      // Every 6-byte pattern is a lane, so the layout is all there is to check; the share is summed
      // once every member's is here (decode_packed_mean), in one pass.
      if (msg->offset == 0 && msg->total == n && is_packed_share(msg->payload, n)) {
        received_.push_back(std::move(msg->payload));
        return Wait::kGot;
      }
      inbox_.transport().recycle(std::move(msg->payload));
      ++counters_.refused_malformed;
      spdlog::warn("secure aggregation: refused a malformed masked share from '{}' (round {}, view {})", from, step,
                   view.id);
      continue;
    }
    if (until >= deadline) return Wait::kAbandon;
    // Give up at once when the share cannot come: the sender was left out of a newer view, the others
    // redo this step in a newer view, or (in a redo) a peer completed it before the abandon.
    if (gossip::left_out_after(inbox_.transport(), view, from)) return Wait::kAbandon;
    bool moved_on = false;
    (void)inbox_.take(
        [&](const peer::Message& m) {
          moved_on = moved_on || (is_masked_share(m) && m.round == step && m.tag == tag && m.view_id > view.id);
          return false;
        },
        gossip::Clock::now());
    if (moved_on || (redoing && peer_moved_past(view, group, step, tag))) return Wait::kAbandon;
  }
}

gossip::MixReport SecureMeanMixer::mix(std::uint64_t step, gossip::RoundTag tag, std::span<float> data, double&) {
  peer::Transport& transport = inbox_.transport();
  const std::string& self = transport.self();
  const auto tag_value = static_cast<std::uint32_t>(tag);
  const std::size_t n = data.size();
  discard_stale(step, tag_value);
  gossip::MixReport report;
  report.scheduled_view_id = transport.view_for(step).id;
  // Encoded once: a redo sends the same values under fresh masks.
  lanes_.resize(n);
  share_.resize(n);
  const EncodeCounts counts = encode(data, lanes_);
  counters_.clipped += counts.clipped;
  counters_.non_finite += counts.non_finite;
  peer::View view = redo_.for_step(transport, step);
  const std::uint64_t first_view_id = view.id;
  bool redoing = false;
  for (;;) {
    const auto rank = view.rank_of(self);
    if (!rank) {
      // The others found this site dead and run without it: it sits the mix out (gossip/mixer.h).
      report.view_id = view.id;
      report.sat_out = true;
      return report;
    }
    const auto group = group_of_(view, *rank, step);
    if (group.size() > kMaxSites)
      throw gossip::MixError("secure aggregation: a round of " + std::to_string(group.size()) +
                             " sites exceeds the fixed-point range's " + std::to_string(kMaxSites));
    if (group.size() <= 1 || n == 0) {
      report.view_id = view.id;
      return report;
    }
    const MaskRound round{view.id, step, tag_value, domain_};
    std::vector<std::string> to;
    for (const auto& member : group)
      if (member != self) to.push_back(member);
    // Masked once and packed straight into each receiver's payload buffer.
    std::vector<std::vector<float>> payloads;
    for (std::size_t k = 0; k < to.size(); ++k) payloads.push_back(transport.take_buffer(packed_words(n)));
    const std::vector<std::span<float>> outs(payloads.begin(), payloads.end());
    mask_and_pack(self, group, keys_, round, lanes_, share_, outs);
    const gossip::ShareHeader header{view.id, step, tag_value, kPhase, n};
    for (std::size_t k = 0; k < to.size(); ++k) gossip::send_share(transport, to[k], header, std::move(payloads[k]));
    counters_.shares_sent += to.size();
    // The measured deadline under --round-timeout auto, as the float mixers take it.
    const auto deadline = gossip::Clock::now() + timeouts_.round_deadline();
    bool complete = true;
    for (const auto& from : to)
      if (receive_share(view, group, from, step, tag_value, n, redoing, deadline) == Wait::kAbandon) {
        complete = false;
        break;
      }
    (void)inbox_.discard_if([&](const peer::Message& m) {
      return is_masked_share(m) && m.round == step && m.tag == tag_value && m.view_id <= view.id;
    });
    if (complete) {
      const std::vector<std::span<const float>> shares(received_.begin(), received_.end());
      decode_packed_mean(share_, shares, data);
      recycle_received();
      report.view_id = view.id;
      return report;
    }
    recycle_received();
    ++report.abandoned;
    ++counters_.rounds_abandoned;
    spdlog::debug("secure round {} (tag {}) in view {} abandoned", step, tag_value, view.id);
    if (abandon_ == Abandon::kSkip || peer_moved_past(view, group, step, tag_value)) {
      // Nobody redoes it with this site: it keeps its own values for the step (they were never
      // overwritten: only a complete round writes `data`).
      report.view_id = abandon_ == Abandon::kSkip ? view.id : first_view_id;
      return report;
    }
    const std::uint64_t failed = view.id;
    view = redo_.after_abandon(inbox_, view, timeouts_.view_change);
    if (view.id == failed) {
      // No view without anybody came: the masks depend on the view, and the transport refuses a share
      // it has received once, so the round cannot be redone; this site keeps its own values, as above.
      report.view_id = view.id;
      return report;
    }
    redoing = true;
    spdlog::debug("secure round {} (tag {}) redone in view {} with fresh masks", step, tag_value, view.id);
  }
}

}  // namespace meridian::privacy
