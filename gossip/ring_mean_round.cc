#include "gossip/ring_mean_round.h"

#include <algorithm>

#include <spdlog/spdlog.h>

namespace meridian::gossip {

MixReport RingMeanRound::run(std::uint64_t step, RoundTag tag, std::span<float> data, const GroupOf& group_of) {
  const auto tag_value = static_cast<std::uint32_t>(tag);
  const auto kind = options_.kind;
  // A member that abandoned the round this site completed last asks for its result while this site
  // moves on: answer before that round's mail is dropped below.
  same_view_.serve();
  // Rounds of one tag run in increasing step order on every site, so mail of an older step of this
  // tag is what an abandoned attempt left behind.
  inbox_.discard_if(
      [&](const peer::Message& m) { return m.kind == kind && base_tag(m.tag) == tag_value && m.round < step; });
  backup_.assign(data.begin(), data.end());
  MixReport report;
  // Whether a peer has sent mail of a later step of this tag: it finished this step (in a ring, some
  // sites can complete a round that others abandon, when a member dies during the all-gather or a
  // link drops a piece of it) or skipped it, and will not take part in a redo of it. Only a member of
  // the attempt's group in a view no newer than the attempt's counts: a site that restarted (a new
  // incarnation under the same name) sends its first mail, of a much later step, in the newer view
  // that took it back, and never had this round to complete.
  auto peer_moved_past = [&](const peer::View& attempt, const std::vector<std::string>& group) {
    bool past = false;
    (void)inbox_.take(
        [&](const peer::Message& m) {
          past = past || (m.kind == kind && base_tag(m.tag) == tag_value && m.round > step &&
                          m.view_id <= attempt.id && std::find(group.begin(), group.end(), m.from) != group.end());
          return false;
        },
        Clock::now());
    return past;
  };
  bool redoing = false;
  peer::View view = redo_.for_step(inbox_.transport(), step);
  const std::uint64_t first_view_id = view.id;
  report.scheduled_view_id = inbox_.transport().view_for(step).id;
  // The views this site has run the round in: a member that completed it in one of them may hand over
  // its result (gossip/same_view_redo.h).
  std::vector<std::uint64_t> tried;
  std::uint32_t attempt = 0;
  for (;;) {
    const auto rank = view.rank_of(inbox_.transport().self());
    if (!rank) {
      // The others found this site dead (a partition, a false death) and run without it; failing here
      // would end a site that is alive. It trains on alone until a view takes it back: membership
      // proposes one as soon as it hears from the others again (peer/membership.h).
      report.view_id = view.id;
      report.sat_out = true;
      return report;
    }
    const auto group = group_of(view, *rank, step);
    if (std::find(tried.begin(), tried.end(), view.id) == tried.end()) tried.push_back(view.id);
    // A result some member handed over: the round's value, with the bits the others hold.
    // Not under a robust mean: a result is one member's word for the whole mean, which is what the
    // robust mean exists not to take; such a round is redone instead.
    auto take_result = [&](Clock::time_point until) {
      if (robust_) return false;
      const auto completed_in = same_view_.take_result(step, tag_value, tried, group, data, until);
      if (!completed_in) return false;
      same_view_.hold(Round{*completed_in, step, tag_value}, group, data);
      report.view_id = *completed_in;
      spdlog::info("round {} (tag {}): took the result a member that completed it in view {} handed over", step,
                   tag_value, *completed_in);
      return true;
    };
    RingOptions options = options_;
    // Abandon now rather than at the deadline when the round cannot finish in this view: a member
    // that a newer announced view leaves out (it left, or was found dead) will not come, and a site
    // that sends this step's mail in a newer view redid the round there (its group-mates of this
    // view, dsync's groups say, must follow it). A redo gives up too when a peer runs a later step:
    // it completed this one before the abandon and will not come back to it. (In a first attempt,
    // later mail from the ring predecessor arrives only after everything it sent for this step.)
    // With kRedo, so does an attempt that a member has left for a higher one in the same view, or
    // for which a member handed over the result. Meanwhile this site answers requests for the round
    // it completed last. (The robust mean waits for its deadline.)
    options.give_up = [&] {
      if (abandon_ == Abandon::kRedo) {
        const bool higher = same_view_.highest_attempt(Round{view.id, step, tag_value}, group) > attempt;
        same_view_.serve();
        if (higher || same_view_.has_result(step, tag_value, tried, group)) return true;
      }
      if (redoing && peer_moved_past(view, group)) return true;
      bool moved_on = false;
      (void)inbox_.take(
          [&](const peer::Message& m) {
            moved_on = moved_on || (m.kind == kind && m.round == step && base_tag(m.tag) == tag_value &&
                                    m.view_id > view.id);
            return false;
          },
          Clock::now());
      return moved_on || std::any_of(group.begin(), group.end(),
                                     [&](const std::string& m) { return left_out_after(inbox_.transport(), view, m); });
    };
    const Round round{view.id, step, attempt_tag(tag_value, attempt)};
    const auto deadline = Clock::now() + timeouts_.round_deadline();
    const auto status =
        robust_ ? robust_->run(group, round, data, deadline, kind) : ring_.run(group, round, data, deadline, options);
    // Drops the pieces of the attempts so far (not requests and results, nor pieces a member already
    // sent for a later attempt in the same view).
    auto discard_attempt = [&](std::uint64_t up_to_view) {
      inbox_.discard_if([&](const peer::Message& m) {
        return m.kind == kind && m.round == step && base_tag(m.tag) == tag_value && !SameViewRedo::is_redo_message(m) &&
               (m.view_id < up_to_view || (m.view_id == up_to_view && attempt_of(m.tag) <= attempt));
      });
    };
    if (status == RoundStatus::kCompleted) {
      discard_attempt(view.id);
      if (abandon_ == Abandon::kRedo) same_view_.hold(Round{view.id, step, tag_value}, group, data);
      report.view_id = view.id;
      return report;
    }
    ++report.abandoned;
    ++abandoned_;
    spdlog::debug("round {} (tag {}) in view {} attempt {} abandoned {}", step, tag_value, view.id, attempt,
                  Clock::now() < deadline ? "early" : "at its deadline");
    std::copy(backup_.begin(), backup_.end(), data.begin());
    if (abandon_ == Abandon::kSkip) {
      discard_attempt(view.id);
      report.view_id = view.id;
      return report;
    }
    if (take_result(Clock::now())) return report;
    // Ask the members for the round's result at once: one that completed it answers from wherever it
    // waits, while this site waits for a newer view below or redoes the round. (The request also tells
    // the members still in the round that this site goes on to the next attempt.)
    same_view_.ask(group, Round{view.id, step, tag_value}, attempt + 1, data.size());
    if (peer_moved_past(view, group)) {
      // Nobody would redo it with this site: the peer that moved past completed the round (or skipped
      // it), and answers from its wait in a later round.
      if (take_result(Clock::now() + timeouts_.round_deadline())) return report;
      // Nobody handed it over (the peer skipped the round too): this site keeps its own values for the
      // step, like a dsync group that cannot finish, and the re-average after the view change pulls the
      // replicas together. It reports the view the peers that moved past completed the round in (its
      // first attempt's), as they do: a trainer that re-averages when the reported view changes
      // (allreduce) must do so at the same step on every site.
      spdlog::info("round {} (tag {}) abandoned in view {}: a peer moved past it and nobody handed over the "
                   "result; this site keeps its own values for the step",
                   step, tag_value, view.id);
      discard_attempt(view.id);
      report.view_id = first_view_id;
      return report;
    }
    const peer::View failed = view;
    // A member that already sends pieces of a later attempt in this view waited for a newer view
    // itself and found none (a request alone does not say so: it goes out before that wait); this site
    // follows it at once.
    bool followed = false;
    (void)inbox_.take(
        [&](const peer::Message& m) {
          followed = followed || (m.kind == kind && m.view_id == view.id && m.round == step &&
                                  base_tag(m.tag) == tag_value && attempt_of(m.tag) > attempt &&
                                  !SameViewRedo::is_redo_message(m));
          return false;
        },
        Clock::now());
    view = redo_.after_abandon(inbox_, failed, followed ? std::chrono::milliseconds(0) : timeouts_.view_change);
    discard_attempt(failed.id);
    redoing = true;
    if (take_result(Clock::now())) return report;
    if (view.id != failed.id) {
      attempt = 0;
      spdlog::debug("round {} (tag {}) redone in view {}", step, tag_value, view.id);
      continue;
    }
    // Nobody was found dead (lost messages, a member slower than the deadline), so no view comes to
    // redo the round in: it is redone in this one under the next attempt, which every piece travels
    // again under (gossip/same_view_redo.h), unless a member hands over the result meanwhile.
    const std::uint32_t asked = attempt + 1;
    attempt = std::max(asked, same_view_.highest_attempt(Round{view.id, step, tag_value}, group));
    if (attempt > SameViewRedo::kMaxAttempts) {
      spdlog::info("round {} (tag {}) abandoned in view {} {} times with no member found dead: this site keeps its "
                   "own values for the step",
                   step, tag_value, view.id, attempt);
      report.view_id = view.id;
      return report;
    }
    spdlog::info(
        "round {} (tag {}) abandoned in view {} with no member found dead (lost messages or a member slower "
        "than the deadline): redoing it in the same view (attempt {})",
        step, tag_value, view.id, attempt);
    if (attempt > asked) same_view_.ask(group, Round{view.id, step, tag_value}, attempt, data.size());
  }
}

}  // namespace meridian::gossip
