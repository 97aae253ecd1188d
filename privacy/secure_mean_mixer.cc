#include "privacy/secure_mean_mixer.h"

#include <algorithm>
#include <bit>
#include <cmath>

#include <spdlog/spdlog.h>

#include "gossip/share_message.h"

namespace meridian::privacy {

namespace {

constexpr auto kKind = peer::MessageKind::kCompressedShare;

bool is_masked_share(const peer::Message& m) {
  return m.kind == kKind && (m.phase == kMaskedLowPhase || m.phase == kMaskedHighPhase);
}

// Adds `half` (the 24-bit halves of n lanes, shifted by `shift`) into `sum` in one pass, and returns
// whether it was well formed: the whole tensor at offset 0, every value a whole number in [0, 2^24).
// Branch-free, so that it vectorizes: in double, v + 2^52 holds a whole v < 2^24 exactly in its low
// mantissa bits, and subtracting 2^52 again gives v back only when v was whole (NaN fails every
// comparison). What is added for a value is a function of its bits alone, so a malformed half is
// taken back out exactly (the sum is modulo 2^64): checking and adding in one pass reads each payload
// once.
bool add_half(const peer::Message& half, int shift, std::span<std::uint64_t> sum) {
  const std::size_t n = sum.size();
  if (half.offset != 0 || half.total != n || half.payload.size() != n) return false;
  constexpr double kMagic = 0x1p52;
  constexpr double kLimit = 0x1p24;
  const float* in = half.payload.data();
  auto lane_bits = [&](std::size_t i) {
    return (std::bit_cast<std::uint64_t>(static_cast<double>(in[i]) + kMagic) & kHalfMask) << shift;
  };
  std::uint64_t bad = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const double v = in[i];
    const auto ok = static_cast<std::uint64_t>(v >= 0.0) & static_cast<std::uint64_t>(v < kLimit) &
                    static_cast<std::uint64_t>((v + kMagic) - kMagic == v);
    bad |= ok ^ 1u;
    sum[i] += lane_bits(i);
  }
  if (bad != 0)
    for (std::size_t i = 0; i < n; ++i) sum[i] -= lane_bits(i);
  return bad == 0;
}

// Splits masked lanes into the two halves sent (low and high 24 bits, as whole-number floats).
void split_halves(std::span<const std::uint64_t> lanes, std::vector<float>& low, std::vector<float>& high) {
  low.resize(lanes.size());
  high.resize(lanes.size());
  for (std::size_t i = 0; i < lanes.size(); ++i) {
    low[i] = static_cast<float>(static_cast<std::int32_t>(lanes[i] & kHalfMask));
    high[i] = static_cast<float>(static_cast<std::int32_t>((lanes[i] >> 24) & kHalfMask));
  }
}

}  // namespace

void mask_share(const std::string& self, const std::vector<std::string>& group, PairKeys& keys, const MaskRound& round,
                std::span<std::uint64_t> lanes) {
  for (const auto& other : group) {
    if (other == self) continue;
    add_pair_mask(keys.with(other), round, /*subtract=*/other < self, lanes);
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

SecureMeanMixer::Wait SecureMeanMixer::receive_half(const peer::View& view, const std::vector<std::string>& group,
                                                    const std::string& from, std::uint64_t step, std::uint32_t tag,
                                                    std::uint32_t phase, bool redoing,
                                                    gossip::Clock::time_point deadline) {
  const int shift = phase == kMaskedLowPhase ? 0 : 24;
  auto mine = [&](const peer::Message& m) {
    return m.kind == kKind && m.phase == phase && m.round == step && m.tag == tag && m.view_id == view.id &&
           m.from == from;
  };
  for (;;) {
    const auto until = std::min(deadline, gossip::Clock::now() + std::chrono::milliseconds(100));
    auto msg = inbox_.take(mine, until);
    if (msg) {
      const bool ok = add_half(*msg, shift, sum_);
      inbox_.transport().recycle(std::move(msg->payload));
      if (ok) return Wait::kGot;
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
  // Both touched now, so that the swap below hands over memory that is already faulted in: a fresh
  // model-sized buffer costs a page fault per 4 KiB on first touch.
  share_.resize(n);
  sum_.resize(n);
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
    share_.assign(lanes_.begin(), lanes_.end());
    mask_share(self, group, keys_, round, share_);
    // Split once: every other member gets the same two halves.
    split_halves(share_, low_, high_);
    for (const auto& to : group) {
      if (to == self) continue;
      gossip::send_share(transport, to, {view.id, step, tag_value, kMaskedLowPhase, n}, low_);
      gossip::send_share(transport, to, {view.id, step, tag_value, kMaskedHighPhase, n}, high_);
      ++counters_.shares_sent;
    }
    // This site's own share starts the sum (share_ is refilled from lanes_ at the next attempt).
    std::swap(sum_, share_);
    // The measured deadline under --round-timeout auto, as the float mixers take it.
    const auto deadline = gossip::Clock::now() + timeouts_.round_deadline();
    bool complete = true;
    for (const auto& from : group) {
      if (from == self) continue;
      for (const auto phase : {kMaskedLowPhase, kMaskedHighPhase})
        if (complete && receive_half(view, group, from, step, tag_value, phase, redoing, deadline) == Wait::kAbandon)
          complete = false;
      if (!complete) break;
    }
    (void)inbox_.discard_if([&](const peer::Message& m) {
      return is_masked_share(m) && m.round == step && m.tag == tag_value && m.view_id <= view.id;
    });
    if (complete) {
      decode_mean(sum_, group.size(), data);
      report.view_id = view.id;
      return report;
    }
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
