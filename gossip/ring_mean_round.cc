#include "gossip/ring_mean_round.h"

#include <algorithm>

#include <spdlog/spdlog.h>

namespace meridian::gossip {

MixReport RingMeanRound::run(std::uint64_t step, RoundTag tag, std::span<float> data, const GroupOf& group_of) {
  const auto tag_value = static_cast<std::uint32_t>(tag);
  const auto kind = options_.kind;
  // Rounds of one tag run in increasing step order on every site, so mail of an older step of this
  // tag is what an abandoned attempt left behind.
  inbox_.discard_if([&](const peer::Message& m) { return m.kind == kind && m.tag == tag_value && m.round < step; });
  backup_.assign(data.begin(), data.end());
  MixReport report;
  // Whether a peer has sent mail of a later step of this tag: it finished this step (in a ring, some
  // sites can complete a round that others abandon, when a member dies during the all-gather) or
  // skipped it, and will not take part in a redo of it. Only a member of the attempt's group in a view
  // no newer than the attempt's counts: a site that restarted (a new incarnation under the same name)
  // sends its first mail, of a much later step, in the newer view that took it back, and never had
  // this round to complete.
  auto peer_moved_past = [&](const peer::View& attempt, const std::vector<std::string>& group) {
    bool past = false;
    (void)inbox_.take(
        [&](const peer::Message& m) {
          past = past || (m.kind == kind && m.tag == tag_value && m.round > step && m.view_id <= attempt.id &&
                          std::find(group.begin(), group.end(), m.from) != group.end());
          return false;
        },
        Clock::now());
    return past;
  };
  bool redoing = false;
  peer::View view = redo_.for_step(inbox_.transport(), step);
  const std::uint64_t first_view_id = view.id;
  report.scheduled_view_id = inbox_.transport().view_for(step).id;
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
    RingOptions options = options_;
    // Abandon now rather than at the deadline when the round cannot finish in this view: a member
    // that a newer announced view leaves out (it left, or was found dead) will not come, and a site
    // that sends this step's mail in a newer view redid the round there (its group-mates of this
    // view, dsync's groups say, must follow it). A redo gives up too when a peer runs a later step:
    // it completed this one before the abandon and will not come back to it. (In a first attempt,
    // later mail from the ring predecessor arrives only after everything it sent for this step.)
    // (The robust mean waits for its deadline.)
    options.give_up = [&] {
      if (redoing && peer_moved_past(view, group)) return true;
      bool moved_on = false;
      (void)inbox_.take(
          [&](const peer::Message& m) {
            moved_on = moved_on || (m.kind == kind && m.round == step && m.tag == tag_value && m.view_id > view.id);
            return false;
          },
          Clock::now());
      return moved_on || std::any_of(group.begin(), group.end(),
                                     [&](const std::string& m) { return left_out_after(inbox_.transport(), view, m); });
    };
    const Round round{view.id, step, tag_value};
    const auto deadline = Clock::now() + timeouts_.round_deadline();
    const auto status =
        robust_ ? robust_->run(group, round, data, deadline, kind) : ring_.run(group, round, data, deadline, options);
    auto discard_attempt = [&](std::uint64_t up_to_view) {
      inbox_.discard_if([&](const peer::Message& m) {
        return m.kind == kind && m.round == step && m.tag == tag_value && m.view_id <= up_to_view;
      });
    };
    if (status == RoundStatus::kCompleted) {
      discard_attempt(view.id);
      report.view_id = view.id;
      return report;
    }
    ++report.abandoned;
    ++abandoned_;
    spdlog::debug("round {} (tag {}) in view {} abandoned {}", step, tag_value, view.id,
                  Clock::now() < deadline ? "early: a member will not come" : "at its deadline");
    std::copy(backup_.begin(), backup_.end(), data.begin());
    if (abandon_ == Abandon::kSkip) {
      discard_attempt(view.id);
      report.view_id = view.id;
      return report;
    }
    if (peer_moved_past(view, group)) {
      // Nobody would redo it with this site: it keeps its own values for the step, like a dsync group
      // that cannot finish, and the re-average after the view change pulls the replicas together. It
      // reports the view the peers that moved past completed the round in (its first attempt's), as
      // they do: a trainer that re-averages when the reported view changes (allreduce) must do so at
      // the same step on every site.
      spdlog::debug("round {} (tag {}) skipped: a peer moved past it; this site keeps its own values", step, tag_value);
      discard_attempt(view.id);
      report.view_id = first_view_id;
      return report;
    }
    const peer::View failed = view;
    view = redo_.after_abandon(inbox_, failed, timeouts_.view_change);
    discard_attempt(failed.id);
    if (view.id == failed.id) {
      // Nobody was found dead (lost messages, a member slower than the deadline), so no view comes to
      // redo the round in, and it cannot be redone in this one: each site relays what it received, so
      // a redo needs every piece again, and the transport refuses a piece it has already received as
      // a replay. Every member that abandoned the round keeps its own values for the step, as a dsync
      // group that cannot finish does, and goes on; the re-average after the next view change pulls
      // the replicas together.
      spdlog::info(
          "round {} (tag {}) abandoned in view {} with no member found dead (lost messages or a member "
          "slower than the deadline): this site keeps its own values for the step",
          step, tag_value, view.id);
      report.view_id = view.id;
      return report;
    }
    redoing = true;
    spdlog::debug("round {} (tag {}) redone in view {}", step, tag_value, view.id);
  }
}

}  // namespace meridian::gossip
