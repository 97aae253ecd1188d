#include "gossip/direct_mean_mixer.h"

#include <algorithm>
#include <cmath>
#include <string>

#include <spdlog/spdlog.h>

#include "gossip/share_message.h"

namespace meridian::gossip {

DirectMeanMixer::DirectMeanMixer(Inbox& inbox, Mixer& exact, CompressionSpec spec, RoundTimeouts timeouts,
                                 std::size_t max_sites)
    : inbox_(inbox),
      exact_(exact),
      feedback_(spec),
      timeouts_(timeouts),
      max_sites_(max_sites),
      same_view_(inbox, peer::MessageKind::kCompressedShare) {}

std::optional<std::span<const float>> DirectMeanMixer::accept(const peer::Message& msg, std::size_t n) {
  if (msg.total != n || msg.phase > static_cast<std::uint32_t>(Encoding::kInt8)) return std::nullopt;
  const auto encoding = static_cast<Encoding>(msg.phase);
  if (encoding == Encoding::kDense) {
    // Dense: the payload itself once it is checked (decode would only copy it).
    if (msg.payload.size() != n) return std::nullopt;
    for (float v : msg.payload)
      if (!std::isfinite(v)) return std::nullopt;
    return std::span<const float>(msg.payload);
  }
  decoded_.resize(n);
  if (!decode(encoding, msg.payload, decoded_)) return std::nullopt;
  return std::span<const float>(decoded_);
}

MixReport DirectMeanMixer::mix(std::uint64_t step, RoundTag tag, std::span<float> data, double& weight) {
  // Dense contributions give every site the exact mean (the same bits everywhere), so the re-average
  // takes the single crossing too, dense whatever the wire: a compressed one would not be exact, and
  // the ring's 2(n − 1) crossings in a row stalled every trainer for seconds at each view change at a
  // few hundred milliseconds one way.
  const bool dense = feedback_.spec().encoding == Encoding::kDense || tag == RoundTag::kReaverage;
  if (tag != RoundTag::kMix && tag != RoundTag::kReaverage) return exact_.mix(step, tag, data, weight);
  peer::Transport& transport = inbox_.transport();
  // Past the site bound the ring's 2(n − 1)/n copies per site beat n − 1 (compressed contributions
  // cannot take the ring, so the bound is for dense ones only).
  const peer::View scheduled = transport.view_for(step);
  if (dense && scheduled.size() > max_sites_) return exact_.mix(step, tag, data, weight);
  const auto tag_value = static_cast<std::uint32_t>(tag);
  const auto kind = peer::MessageKind::kCompressedShare;
  const auto encoding = static_cast<std::uint32_t>(dense ? Encoding::kDense : feedback_.spec().encoding);
  // A member that abandoned the round this site completed last asks for its result while this site
  // moves on: answer before that round's mail is dropped below.
  same_view_.serve();
  // Rounds run in increasing step order, so older mail is what an abandoned attempt left behind.
  inbox_.discard_if([&](const peer::Message& m) { return m.kind == kind && m.round < step; });
  const std::size_t n = data.size();
  // A dense contribution is the input itself: no error feedback, nothing packed, nothing decoded.
  input_.assign(data.begin(), data.end());
  if (!dense) {
    residual_.assign(feedback_.residual().begin(), feedback_.residual().end());
    own_.resize(n);
  }
  MixReport report;
  // Re-averages after a view change key on the view announced for the step (gossip/mixer.h); left at 0,
  // every mix here looked like a change to dts and diloco whose re-average takes the ring, so they ran an
  // exact ring re-average after every compressed exchange.
  report.scheduled_view_id = scheduled.id;
  // A member's contribution to this round in `attempt_view`, under any attempt: every attempt sends
  // the same values.
  auto is_contribution = [&](const peer::Message& m, std::uint64_t attempt_view) {
    return m.kind == kind && m.round == step && base_tag(m.tag) == tag_value && m.view_id == attempt_view &&
           !SameViewRedo::is_redo_message(m);
  };
  // Whether a member of `attempt` from rank `from_rank` on whose contribution has not arrived has sent
  // mail of a later step in a view no newer than the attempt's: it completed this step (mixes run one
  // after another in step order) and will not send its contribution again.
  auto missing_peer_moved_past = [&](const peer::View& attempt, std::size_t from_rank) {
    for (std::size_t r = from_rank; r < attempt.size(); ++r) {
      const std::string& name = attempt.at(r);
      if (name == transport.self()) continue;
      bool here = false, past = false;
      (void)inbox_.take(
          [&](const peer::Message& m) {
            if (m.kind != kind || m.from != name) return false;
            here = here || is_contribution(m, attempt.id);
            past = past || (m.round > step && m.view_id <= attempt.id);
            return false;
          },
          Clock::now());
      if (past && !here) return true;
    }
    return false;
  };
  peer::View view = redo_.for_step(transport, step);
  const std::uint64_t first_view_id = view.id;
  // After an attempt in `summed_view` failed, `data` holds the sum of the contributions of its ranks
  // below `summed_ranks`: a redo in the same view goes on from there, so it waits only for what is
  // missing and adds in the same order, to the same bits as the sites that completed the round.
  std::optional<std::uint64_t> summed_view;
  std::size_t summed_ranks = 0;
  // The views this site has run the round in (a member that completed it in one may hand over its
  // result), and the attempt in the current one (gossip/same_view_redo.h).
  std::vector<std::uint64_t> tried;
  std::uint32_t attempt = 0;
  for (;;) {
    const auto rank = view.rank_of(transport.self());
    if (!rank) {
      // A failed attempt left partial sums in `data`.
      std::copy(input_.begin(), input_.end(), data.begin());
      // The others found this site dead and run without it. As on the ring (gossip/ring_mean_round.cc),
      // it sits the mix out with its own values and trains on until a view takes it back; failing here
      // ended a live site whose heartbeats a loaded machine had delayed.
      report.view_id = view.id;
      report.sat_out = true;
      return report;
    }
    if (std::find(tried.begin(), tried.end(), view.id) == tried.end()) tried.push_back(view.id);
    if (!dense) feedback_.compress(input_, packed_, own_);
    const std::span<const float> wire = dense ? std::span<const float>(input_) : std::span<const float>(packed_);
    const std::span<const float> own = dense ? std::span<const float>(input_) : std::span<const float>(own_);
    const ShareHeader header{view.id, step, attempt_tag(tag_value, attempt), encoding, n};
    for (std::size_t r = 0; r < view.size(); ++r)
      if (r != *rank) send_share(transport, view.at(r), header, wire);
    // Summed in rank order on every site, so every site ends with the same bits. The first
    // contribution is copied rather than added to zero, which spares a pass and changes no value.
    auto add = [&](std::span<const float> contribution, bool first) {
      if (first) std::copy(contribution.begin(), contribution.end(), data.begin());
      else
        for (std::size_t i = 0; i < n; ++i) data[i] += contribution[i];
    };
    // An attempt that cannot finish: a member left it for a higher one in this view, or handed over
    // the result. Meanwhile this site answers requests for the round it completed last.
    auto give_up = [&] {
      const bool higher = same_view_.highest_attempt(Round{view.id, step, tag_value}, view.members) > attempt;
      same_view_.serve();
      return higher || same_view_.has_result(step, tag_value, tried, view.members);
    };
    const auto deadline = Clock::now() + timeouts_.round_deadline();
    std::size_t r = summed_view == view.id ? summed_ranks : 0;
    for (; r < view.size(); ++r) {
      if (r == *rank) {
        add(own, r == 0);
        continue;
      }
      const std::string& from = view.at(r);
      bool added = false;
      for (;;) {
        // A member a newer announced view leaves out abandons the round at once instead of at its
        // deadline: its contribution will not come.
        constexpr std::chrono::milliseconds kCheck{100};
        const auto until = std::min(deadline, Clock::now() + kCheck);
        auto msg = take_unless_left_out(
            inbox_, [&](const peer::Message& m) { return is_contribution(m, view.id) && m.from == from; }, view, from,
            until);
        if (!msg) {
          if (until < deadline && !left_out_after(transport, view, from) && !give_up()) continue;
          break;
        }
        const auto contribution = accept(*msg, n);
        if (contribution) add(*contribution, r == 0);
        transport.recycle(std::move(msg->payload));
        added = contribution.has_value();
        if (added) break;
        ++rejected_;
      }
      if (!added) break;
    }
    const bool complete = r == view.size();
    if (complete) {
      const float scale = 1.0f / static_cast<float>(view.size());
      for (float& v : data) v *= scale;
      same_view_.hold(Round{view.id, step, tag_value}, view.members, data);
      report.view_id = view.id;
      return report;
    }
    ++report.abandoned;
    ++abandoned_;
    if (!dense) feedback_.set_residual(residual_);
    auto discard_attempt = [&](std::uint64_t up_to_view) {
      inbox_.discard_if([&](const peer::Message& m) {
        return m.kind == kind && m.round == step && m.view_id <= up_to_view && !SameViewRedo::is_redo_message(m);
      });
    };
    summed_view = view.id;
    summed_ranks = r;
    // A result some member handed over: the round's value, with the bits the others hold. What this
    // site sent was summed by the members that completed the round, so with compression its residual
    // is the one that contribution left (compress() from the restored residual gives it again).
    auto take_result = [&](Clock::time_point until) {
      const auto completed_in = same_view_.take_result(step, tag_value, tried, view.members, data, until);
      if (!completed_in) return false;
      if (!dense) feedback_.compress(input_, packed_, own_);
      same_view_.hold(Round{*completed_in, step, tag_value}, view.members, data);
      report.view_id = *completed_in;
      spdlog::info("direct round {} (tag {}): took the result a member that completed it in view {} handed over",
                   step, tag_value, *completed_in);
      return true;
    };
    if (take_result(Clock::now())) return report;
    // Ask the members for the round's result at once: one that completed it answers from wherever it
    // waits, while this site waits for a newer view below or redoes the round. (The request also tells
    // the members still in the round that this site goes on to the next attempt.)
    same_view_.ask(view.members, Round{view.id, step, tag_value}, attempt + 1, n);
    if (missing_peer_moved_past(view, r)) {
      // A peer whose contribution is missing completed the round (its mail of a later step is here)
      // and will not send it again; it answers from its wait in a later round.
      if (take_result(Clock::now() + timeouts_.round_deadline())) return report;
      // Nobody handed it over: as on the ring (gossip/ring_mean_round.cc), this site keeps its own
      // values for the step and reports the view the peer completed it in.
      spdlog::info(
          "direct round {} (tag {}) abandoned in view {}: a peer whose contribution was lost completed "
          "it and moved on, and nobody handed over the result; this site keeps its own values for the step",
          step, tag_value, view.id);
      discard_attempt(view.id);
      std::copy(input_.begin(), input_.end(), data.begin());
      report.view_id = first_view_id;
      return report;
    }
    const peer::View failed = view;
    // A member that already sends its contribution under a later attempt in this view waited for a
    // newer view itself and found none (a request alone does not say so: it goes out before that
    // wait); this site follows it at once.
    bool followed = false;
    (void)inbox_.take(
        [&](const peer::Message& m) {
          followed = followed || (is_contribution(m, view.id) && attempt_of(m.tag) > attempt);
          return false;
        },
        Clock::now());
    view = redo_.after_abandon(inbox_, failed, followed ? std::chrono::milliseconds(0) : timeouts_.view_change);
    if (take_result(Clock::now())) return report;
    if (view.id != failed.id) {
      discard_attempt(failed.id);
      attempt = 0;
      continue;
    }
    const std::uint32_t asked = attempt + 1;
    attempt = std::max(asked, same_view_.highest_attempt(Round{view.id, step, tag_value}, view.members));
    if (attempt > SameViewRedo::kMaxAttempts) {
      // Still missing after the last attempt (a peer whose contribution this site refused as invalid
      // sends the same values each time): as above, keep its own values.
      spdlog::info(
          "direct round {} (tag {}) abandoned in view {} {} times with no member found dead: this site keeps "
          "its own values for the step",
          step, tag_value, view.id, attempt);
      std::copy(input_.begin(), input_.end(), data.begin());
      report.view_id = view.id;
      return report;
    }
    // Nobody was found dead (lost messages, a member slower than the deadline), so no view comes to
    // redo the round in: it is redone in this one under the next attempt (gossip/same_view_redo.h),
    // whose contributions every member takes again. `data` keeps the contributions summed so far and
    // the mail that arrived for this view stays, so the redo waits only for those that are missing,
    // unless a member hands over the result meanwhile.
    spdlog::info(
        "direct round {} (tag {}) abandoned in view {} with no member found dead (lost messages or a "
        "member slower than the deadline): redoing it in the same view (attempt {})",
        step, tag_value, view.id, attempt);
    if (attempt > asked) same_view_.ask(view.members, Round{view.id, step, tag_value}, attempt, n);
  }
}

}  // namespace meridian::gossip
