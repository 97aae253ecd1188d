#include <algorithm>
#include <optional>
#include <thread>

#include <spdlog/spdlog.h>

#include "daemon/status/human_format.h"
#include "daemon/site_daemon_impl.h"
#include "peer/take_back_round.h"

namespace meridian::daemon {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

}  // namespace

bool SiteDaemon::Impl::wait_for_view(bool resumed) {
  const std::size_t need = min_sites.count;
  const auto deadline = Clock::now() + seconds_ms(config.join_timeout);
  auto next_note = Clock::now();
  std::optional<peer::View> candidate;
  auto candidate_since = Clock::now();
  // Views settle within a few heartbeats; starting on one that is about to be replaced would put
  // this site in other rounds than its peers. Member lists travel with the heartbeats, so a longer
  // --heartbeat-interval needs a longer wait.
  const auto settle = std::max(milliseconds(1000), 2 * heartbeat_milliseconds(config.heartbeat_interval));
  // A resuming site may first hear of a view its previous incarnation was in; the view that takes it
  // back comes after one that leaves the old incarnation out (peer/membership.h). Only when nobody
  // leaves it out for a few heartbeat timeouts (the whole federation restarted) does any view do.
  const auto waiting_since = Clock::now();
  const auto alone_grace = 2 * heartbeat_timeout_bound(config) + settle;
  // Both views come after the checkpoint's round: the previous incarnation was alive there, so a view
  // that left it out before (when the federation formed, say) does not count.
  const std::uint64_t checkpoint_round = resumed && resume ? resume->step : 0;
  // A federation that chooses its shapes from the network starts on a measured pace: while the view
  // awaits the amendment that brings it (peer/membership.h), starting on it would run the default
  // shape. The view's first member amends it once every member reported its figures, or twice the
  // heartbeat timeout on with those reported so far, as soon as it has timed its own steps and measured
  // a round trip. The bound is for a first member that cannot (its steps take many seconds each):
  // stopping the wait is safe in that the amendment keeps the view's round, so this site still starts
  // with the others; only an amendment proposed just then would find it on the other shape, hence a
  // bound far beyond the first member's patience: four heartbeat timeouts, half a minute at least,
  // plus the settling, and at most half the --join-timeout.
  std::optional<Clock::time_point> pace_awaited_since;
  bool pace_given_up = false;
  const auto pace_grace = std::min(
      std::max<milliseconds>(4 * heartbeat_timeout_bound(config), std::chrono::seconds(30)) + settle,
      seconds_ms(config.join_timeout) / 2);
  auto awaits_pace = [&](const peer::View& view) {
    if (pace_given_up || view.size() < 2 || !transport->awaits_pace()) {
      pace_awaited_since.reset();
      return false;
    }
    if (!pace_awaited_since) {
      pace_awaited_since = Clock::now();
      spdlog::info("view {} from round {} carries no measured pace yet: waiting for '{}' to announce it", view.id,
                   view.effective_round, view.members.front());
    } else if (Clock::now() - *pace_awaited_since >= pace_grace) {
      spdlog::warn(
          "view {} from round {}: no measured pace announced within {} ('{}' has not timed its steps or measured "
          "a round trip): starting on the default shape, from the same round",
          view.id, view.effective_round, format_duration(std::chrono::duration<double>(pace_grace).count()),
          view.members.front());
      pace_given_up = true;
      return false;
    }
    return true;
  };
  // Views seen since the last waiting line: many mean the view does not settle.
  std::uint64_t last_view_id = transport->latest_view().id;
  std::size_t views_seen = 0;
  // The waiting line is gone from `meridian status` once this wait ends, however it ends.
  struct ClearNote {
    Impl& impl;
    ~ClearNote() { impl.waiting_note.lock()->clear(); }
  } clear_note{*this};
  auto back_in = [&](const peer::View& view) {
    return peer::take_back_round(view, config.name, checkpoint_round,
                                 [&](std::uint64_t round) { return transport->view_for(round); });
  };
  while (true) {
    if (stop) return false;
    // The site this one joins through refused its terms and will never admit it: stop now with its
    // reason. The transport reports only such a refusal (peer/federation_transport.h); one from any
    // other member is counted, not obeyed, so a hostile member cannot stop a starting site.
    if (auto refusal = transport->refusal()) throw error::UserError(*refusal);
    const auto view = transport->latest_view();
    if (view.id != last_view_id) {
      last_view_id = view.id;
      ++views_seen;
    }
    const bool enough = view.rank_of(config.name) && view.size() >= need &&
                        (!resumed || back_in(view).has_value() || Clock::now() - waiting_since >= alone_grace) &&
                        !awaits_pace(view);
    if (enough) {
      if (!candidate || *candidate != view) {
        candidate = view;
        candidate_since = Clock::now();
      } else if (const auto back = resumed ? back_in(view) : std::nullopt;
                 back && Clock::now() - candidate_since >= settle) {
        // The view that takes this site back was announced for it. It settles like any other: this
        // site may have proposed it from the stale round it knew while its peers proposed the same id
        // from theirs, and the greater proposal replaces the other only until this site runs in it.
        // Its peers wait at its first round for it (within --round-timeout).
        spdlog::info("view {} from round {}: {} ({}), rejoining at round {}", view.id, view.effective_round,
                     join_names(view.members), format_count(view.size(), "site"), *back);
        trainer.taken_back_at = *back;
        return true;
      } else if (Clock::now() - candidate_since >= settle) {
        spdlog::info("view {} from round {}: {} ({}){}", view.id, view.effective_round, join_names(view.members),
                     format_count(view.size(), "site"), resumed ? ", rejoining" : "");
        if (view.size() == 1)
          spdlog::warn("training alone: the view holds only this site ({}); no other site's data takes part",
                       describe(min_sites));
        return true;
      }
    } else {
      candidate.reset();
    }
    if (Clock::now() > deadline) {
      std::string why;
      for (const auto& problem : transport->join_problems()) why += "; " + problem;
      throw error::PeerError("gave up after --join-timeout " + format_duration(config.join_timeout) + ": " +
                             std::to_string(transport->alive_members().size()) + " of " + format_count(need, "site") +
                             " reachable (" + join_names(transport->alive_members()) +
                             "); check --join addresses, the roster and that the other sites are running" + why);
    }
    if (Clock::now() >= next_note) {
      // What the connections to the --join sites say (nobody listening, key refused, ...), if anything,
      // then what this site and its peers know of sites that do not reach each other.
      std::string why;
      for (const auto& problem : transport->join_problems()) why += "; " + problem;
      why += known_causes();
      // Enough sites, but the view keeps changing: the members do not all reach each other.
      const std::string unsettled =
          view.size() >= need && view.rank_of(config.name) && views_seen > 2 ? ", the view does not settle: " +
                                                                                   std::to_string(views_seen) +
                                                                                   " views in the last 5 s"
                                                                             : "";
      const std::string line = fmt::format("waiting for {} in the view ({}; have {}: {}{}); --join {}{}",
                                           format_count(need, "site"), describe(min_sites), view.size(),
                                           join_names(view.members), unsettled,
                                           config.join.empty() ? "(none: others must join this site)"
                                                               : join_names(config.join),
                                           why);
      spdlog::info("{}", line);
      *waiting_note.lock() = line;
      views_seen = 0;
      next_note = Clock::now() + std::chrono::seconds(5);
    }
    std::this_thread::sleep_for(milliseconds(50));
  }
}

std::uint64_t SiteDaemon::Impl::rejoin_round(const peer::View& view, std::uint64_t fallback) {
  // The peers mix in round r and wait for this site there: their first message to it in the view that
  // includes it names r (older mail, sent to the previous incarnation and flushed to this one, does
  // not count). When nobody sends (the whole federation restarted), the view's round is the common start.
  observe_min_view = view.id;
  observe_rounds = true;
  const auto deadline = Clock::now() + round_timeout_bound(config) + std::chrono::seconds(2);
  while (Clock::now() < deadline && !stop) {
    if (const auto r = observed_round.load(); r > 0) {
      observe_rounds = false;
      spdlog::info("peers are mixing round {}", r - 1);
      return r - 1;
    }
    std::this_thread::sleep_for(milliseconds(10));
  }
  observe_rounds = false;
  spdlog::info("no peer has sent a round yet: starting at round {}, the view's", fallback);
  return fallback;
}

std::uint64_t SiteDaemon::Impl::agree_end_round(const peer::View& view, std::uint64_t steps) {
  // Every member of the starting view says how many steps its data gives it; the run ends after the
  // smallest. A member that already trains (this site joins a running federation) answers with the
  // run's end round, which this site then takes. Plans are re-sent each second in case one was sent
  // before a peer's connection was up.
  const RunPlan own{steps, 0};
  const auto deadline = Clock::now() + round_timeout_bound(config) + std::chrono::seconds(10);
  auto next_send = Clock::now();
  while (!stop) {
    if (Clock::now() >= next_send) {
      for (const auto& m : view.members)
        if (m != config.name) transport->send(m, plan_message(own));
      next_send = Clock::now() + std::chrono::seconds(1);
    }
    const auto heard = plans.snapshot();
    std::uint64_t steps = own.steps;
    std::size_t missing = 0;
    for (const auto& m : view.members) {
      if (m == config.name) continue;
      const auto it = heard.find(m);
      if (it == heard.end()) {
        ++missing;
        continue;
      }
      if (it->second.end_round != 0) {
        spdlog::info("joining a running federation: '{}' trains until round {}", m, it->second.end_round);
        trainer.joined_run_start = std::min(it->second.start_round, view.effective_round);
        return std::max(it->second.end_round, view.effective_round);
      }
      steps = std::min(steps, it->second.steps);
    }
    const bool late = Clock::now() >= deadline;
    if (missing == 0 || late) {
      if (late)
        spdlog::warn("{} of {} sent no plan in time: the run length counts only the others{}", missing,
                     format_count(view.size(), "site"), known_causes());
      if (steps < own.steps)
        spdlog::info("the run ends after {} steps, as the smallest site's data gives ({} here)", steps, own.steps);
      return view.effective_round + steps;
    }
    std::this_thread::sleep_for(milliseconds(20));
  }
  return view.effective_round + own.steps;
}

}  // namespace meridian::daemon
