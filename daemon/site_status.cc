#include <algorithm>

#include <spdlog/spdlog.h>

#include "daemon/status/human_format.h"
#include "daemon/control/reload_signal.h"
#include "daemon/control/shutdown_signals.h"
#include "daemon/site_daemon_impl.h"

namespace meridian::daemon {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

}  // namespace

std::optional<gossip::MixInFlight> SiteDaemon::Impl::mix_in_flight() {
  const auto server = mix_server.lock();
  if (*server == nullptr) return std::nullopt;
  return (*server)->in_flight();
}

std::optional<std::string> SiteDaemon::Impl::mix_wait_note() {
  const auto flight = mix_in_flight();
  if (!flight) return std::nullopt;
  const double waited = std::chrono::duration<double>(Clock::now() - flight->since).count();
  if (waited < 1) return std::nullopt;
  const auto view = transport->view_for(flight->step);
  std::string peers;
  for (const auto& m : view.members)
    if (m != config.name) peers += (peers.empty() ? "" : ", ") + m;
  const double deadline = std::chrono::duration<double>(round_deadline ? round_deadline->deadline()
                                                                        : round_timeout_bound(config))
                              .count();
  return "round " + std::to_string(flight->step) +
         (flight->tag == gossip::RoundTag::kReaverage ? " (re-average)" : "") + " has waited " +
         format_duration(waited) + " for its peers in view " + std::to_string(view.id) + " (" +
         (peers.empty() ? std::string("none") : peers) + "); a round is abandoned after " + format_duration(deadline) +
         (round_deadline ? " (--round-timeout auto)" : " (--round-timeout)");
}

void SiteDaemon::Impl::log_mix_wait() {
  const auto flight = mix_in_flight();
  if (!flight || Clock::now() - flight->since < std::chrono::seconds(5) || control.mix_wait_logged == flight->step)
    return;
  if (auto note = mix_wait_note()) {
    spdlog::info("'{}': {}", config.name, *note);
    control.mix_wait_logged = flight->step;
  }
}

StatusReport SiteDaemon::Impl::status() {
  StatusReport r;
  r.site = config.name;
  r.algorithm = algo.name();
  r.state = to_string(state.load());
  r.listen = transport->endpoint();
  const auto alive = transport->alive_members();
  const auto members = transport->members();
  r.peers_alive = static_cast<int>(alive.size());
  r.peers_known = static_cast<int>(std::max<std::size_t>(members.size(), 1));
  r.view_id = transport->latest_view().id;
  r.uptime_seconds = std::chrono::duration<double>(Clock::now() - started).count();
  r.notes = notes();
  const auto seconds_of = [](auto d) { return std::chrono::duration<double>(d).count(); };
  if (round_deadline) {
    r.round_timeout_seconds = seconds_of(round_deadline->deadline());
    r.round_timeout_basis = "auto: " + peer::describe_basis(round_deadline->basis(), round_deadline->rule(), "mixes");
  } else {
    r.round_timeout_seconds = seconds_of(round_timeout_bound(config));
    r.round_timeout_basis = "given";
  }
  if (heartbeat_deadline) {
    r.heartbeat_timeout_seconds = seconds_of(heartbeat_deadline->deadline());
    r.heartbeat_timeout_basis =
        "auto: " + peer::describe_basis(heartbeat_deadline->basis(), heartbeat_deadline->rule(), "heartbeat gaps");
  } else {
    r.heartbeat_timeout_seconds = seconds_of(heartbeat_timeout_bound(config));
    r.heartbeat_timeout_basis = "given";
  }
  const auto shown = live.lock();
  r.step = shown->step;
  r.epoch = shown->epoch;
  if (shown->total_steps) {
    // A run that stalls (peers gone, a round waiting) slows its pace, so the time left grows honestly.
    if (state.load() == SiteState::kTraining) shown->pace.note(shown->step, Clock::now());
    const auto progress = shown->pace.progress(*shown->total_steps);
    r.total_steps = progress.total;
    r.percent_done = progress.percent;
    r.eta_seconds = progress.eta_seconds;
  }
  r.train_loss = shown->train_loss;
  r.test_accuracy = shown->test_accuracy;
  if (config.dp()) {
    r.dp_epsilon_spent = shown->dp_epsilon_spent.value_or(0.0);
    if (config.dp_epsilon > 0) r.dp_epsilon_budget = config.dp_epsilon;
  }
  r.staleness = shown->staleness;
  r.push_sum_weight = shown->push_sum_weight;
  r.samples_per_second = shown->samples_per_second;
  r.bytes_per_second = shown->bytes_per_second;
  if (settings.max_send_bits_per_s > 0) r.max_send_bytes_per_second = settings.max_send_bits_per_s / 8;
  r.last_checkpoint = shown->last_checkpoint;
  if (shown->checkpoint_time) {
    r.checkpoint_age_seconds = std::chrono::duration<double>(Clock::now() - *shown->checkpoint_time).count();
  }
  if (shown->shape) {
    r.shape = shown->shape->text;
    r.shape_since_round = shown->shape->from_round;
    if (shown->shape->pace.measured()) {
      r.shape_round_trip_seconds = static_cast<double>(shown->shape->pace.rtt_us) / 1e6;
      r.shape_step_seconds = static_cast<double>(shown->shape->pace.step_us) / 1e6;
    }
  }
  return r;
}

std::vector<PeerReport> SiteDaemon::Impl::peers() {
  std::vector<PeerReport> out;
  const auto view = transport->latest_view();
  for (const auto& m : transport->members()) {
    PeerReport p;
    p.name = m.record.name;
    p.address = m.record.address;
    p.state = m.record.state == peer::MemberState::kAlive  ? "alive"
              : m.record.state == peer::MemberState::kDead ? "dead"
                                                           : "left";
    if (const auto rank = view.rank_of(m.record.name)) p.rank = static_cast<int>(*rank);
    if (m.rtt) p.rtt_seconds = std::chrono::duration<double>(*m.rtt).count();
    if (m.last_heard) p.last_heard_seconds = std::chrono::duration<double>(Clock::now() - *m.last_heard).count();
    p.bytes_sent = m.bytes_out;
    p.bytes_received = m.bytes_in;
    out.push_back(std::move(p));
  }
  return out;
}

LeaveReport SiteDaemon::Impl::leave() {
  LeaveReport r;
  r.accepted = !stop.exchange(true);
  r.message = r.accepted ? "leaving: finishing the step in flight, writing a checkpoint, then announcing the leave"
                         : "already leaving";
  if (r.accepted) spdlog::info("leave requested over the control socket");
  return r;
}

void SiteDaemon::Impl::refresh_network_metrics(
    std::map<std::string, std::pair<std::uint64_t, std::uint64_t>>& last_bytes,
    std::array<std::uint64_t, peer::kRejectCauseCount>& last_rejected, std::uint64_t& last_zap_denied) {
  const auto members = transport->members();
  metrics->peers_alive.set(static_cast<double>(transport->alive_members().size()));
  for (const auto& m : members) {
    const auto& name = m.record.name;
    if (name == config.name) continue;
    if (m.record.state == peer::MemberState::kLeft) {
      if (last_bytes.erase(name) > 0) metrics->forget_peer(name);
      continue;
    }
    if (m.rtt) metrics->peer_rtt_seconds.with({name}).set(std::chrono::duration<double>(*m.rtt).count());
    auto& [out, in] = last_bytes[name];
    // A restarted peer's counters may start again from zero; count only growth.
    if (m.bytes_out > out) metrics->peer_sent_bytes.with({name}).inc(static_cast<double>(m.bytes_out - out));
    if (m.bytes_in > in) metrics->peer_received_bytes.with({name}).inc(static_cast<double>(m.bytes_in - in));
    metrics->peer_sent_bytes.with({name});
    metrics->peer_received_bytes.with({name});
    out = m.bytes_out;
    in = m.bytes_in;
  }
  const auto zap_denied = transport->stats().zap_denied;
  if (zap_denied > last_zap_denied) metrics->zap_denied.inc(static_cast<double>(zap_denied - last_zap_denied));
  last_zap_denied = zap_denied;
  const auto rejected = transport->rejections().snapshot();
  for (std::size_t c = 0; c < rejected.size(); ++c) {
    auto& counter = metrics->rejected_messages.with({std::string(peer::to_string(static_cast<peer::RejectCause>(c)))});
    if (rejected[c] > last_rejected[c]) counter.inc(static_cast<double>(rejected[c] - last_rejected[c]));
    last_rejected[c] = rejected[c];
  }
  if (config.secure_aggregation) {
    const auto secure = secure_counters.snapshot();
    for (std::size_t e = 0; e < secure.size(); ++e) {
      auto& counter = metrics->secure_aggregation.with({std::string(privacy::kSecureAggregationEvents[e])});
      auto& reported = control.secure_reported[e];
      if (secure[e] > reported) counter.inc(static_cast<double>(secure[e] - reported));
      reported = secure[e];
    }
  }
}

void SiteDaemon::Impl::serve_control() {
  // Its own thread, so that status, peers and leave are answered while the communication thread waits
  // inside a mix for a slow or dead peer (up to a round deadline plus a view change).
  ControlServer control(config.control_socket_or_default(), *this);
  spdlog::info("control socket {}", control.path());
  std::map<std::string, std::pair<std::uint64_t, std::uint64_t>> last_bytes;
  std::array<std::uint64_t, peer::kRejectCauseCount> last_rejected{};
  std::uint64_t last_zap_denied = 0;
  std::set<std::string> sites_in_metrics;
  auto next_refresh = Clock::now();
  auto next_summary = Clock::now();
  while (!trainer_done) {
    control.serve(milliseconds(20));
    while (auto msg = transport->receive_control(milliseconds(0))) {
      if (federation_view.note(*msg, Clock::now())) continue;  // a peer's summary (site_federation.cc)
      if (reachability.note(*msg)) continue;                     // whom a peer reaches (daemon/federation/reachability.h)
      // A peer's moments or the federation's input scaling (daemon/federation/input_scaling_exchange.h).
      if (auto noted = scaling.note(*msg); noted.recognized) {
        if (noted.reply) transport->send(msg->from, std::move(*noted.reply));
        continue;
      }
      // A peer's plan (daemon/federation/run_plan.h); one that has not started yet hears the run's end from a
      // site that trains.
      const auto plan = plans.note(*msg);
      if (!plan) {
        spdlog::warn(
            "ignored a control message from '{}' that is none of a run plan, input statistics or a site summary",
            msg->from);
        continue;
      }
      if (plan->end_round == 0 && run_end != 0) transport->send(msg->from, plan_message({data.total_steps, run_end, run_start}));
    }
    if (daemon_options.handle_signals && ShutdownSignals::requested() && !stop.exchange(true)) {
      spdlog::info("stop requested: finishing the step in flight, then checkpoint and leave (again to exit at once)");
    }
    if (daemon_options.handle_signals && ReloadSignal::take()) reload_roster_on_signal();
    if (Clock::now() >= next_summary) {
      share_summary();
      next_summary = Clock::now() + milliseconds(1000);
    }
    if (Clock::now() >= next_refresh) {
      refresh_network_metrics(last_bytes, last_rejected, last_zap_denied);
      refresh_federation(sites_in_metrics);
      next_refresh = Clock::now() + milliseconds(500);
    }
  }
}

}  // namespace meridian::daemon
