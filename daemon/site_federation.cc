// The federation view of a running site (daemon/federation/federation_view.h): the control thread sends this
// site's summary to the live members once a second, keeps the view to the current members, and
// refreshes the per-site metrics and the status page from it.
#include <algorithm>

#include <spdlog/spdlog.h>

#include "daemon/site_daemon_impl.h"

namespace meridian::daemon {
namespace {

using Clock = std::chrono::steady_clock;

void set_or_clear(Gauge& gauge, const std::optional<double>& value) {
  if (value) gauge.set(*value);
  else gauge.clear();
}

}  // namespace

SiteRow SiteDaemon::Impl::own_summary() {
  SiteRow r;
  r.site = config.name;
  r.self = true;
  r.state = to_string(state.load());
  // The gauges follow every step and evaluation (the live status only every progress line), and are
  // absent until measured (daemon/metrics/daemon_metrics.h).
  if (metrics->train_loss.present()) r.train_loss = metrics->train_loss.value();
  if (metrics->test_accuracy.present()) r.test_accuracy = metrics->test_accuracy.value();
  if (metrics->samples_per_second.present()) r.samples_per_second = metrics->samples_per_second.value();
  r.epoch = static_cast<std::uint64_t>(std::max(0.0, metrics->epoch.value()));
  const auto shown = live.lock();
  r.step = shown->step;
  r.push_sum_weight = shown->push_sum_weight;
  r.staleness = shown->staleness;
  return r;
}

ReachReport SiteDaemon::Impl::own_reach() const {
  return reachability.own_report(transport->alive_members(), transport->refused_by());
}

std::string SiteDaemon::Impl::known_causes() const {
  std::string text;
  for (const auto& cause : reachability.causes(own_reach())) text += (text.empty() ? "" : ", ") + cause;
  return text.empty() ? text : "; as far as this site knows: " + text;
}

std::vector<std::string> SiteDaemon::Impl::notes() {
  std::vector<std::string> out;
  bool waiting = false;
  {
    const auto note = waiting_note.lock();
    if (!note->empty()) out.push_back(*note);
    waiting = !note->empty();
  }
  if (auto mix = mix_wait_note()) out.push_back(std::move(*mix));
  for (const auto& [name, holders] : reachability.unlisted()) {
    std::string held;
    for (const auto& h : holders) held += (held.empty() ? "" : ", ") + h;
    out.push_back(name + " is a member at " + held + " but this site's roster (" + config.roster +
                  ") does not list it");
  }
  // The waiting line names the causes already.
  if (!waiting)
    for (auto& cause : reachability.causes(own_reach())) out.push_back("as far as this site knows: " + cause);
  return out;
}

void SiteDaemon::Impl::log_unlisted() {
  for (const auto& [name, holders] : reachability.unlisted()) {
    if (!control.unlisted_logged.insert(name).second) continue;
    std::string held;
    for (const auto& h : holders) held += (held.empty() ? "" : ", ") + h;
    spdlog::warn(
        "'{}' is a member at {}, but this site's roster {} does not list it: this site refuses it, so the "
        "federation cannot form one view with it. If it belongs, add it here (meridian roster add); if not, "
        "{} should remove it",
        name, held, config.roster, held);
  }
}

void SiteDaemon::Impl::share_summary() {
  const auto summary = own_summary();
  federation_view.note_self(summary, Clock::now());
  const auto message = summary_message(summary);
  const auto reach = reach_message(own_reach());
  try {
    for (const auto& name : transport->alive_members())
      if (name != config.name) {
        transport->send(name, message);
        transport->send(name, reach);
      }
  } catch (const peer::TransportError&) {
    // Stopped or failed: the communication thread reports a failure, and a stopped site has no peers.
  }
}

std::vector<SiteRow> SiteDaemon::Impl::federation() {
  federation_view.note_self(own_summary(), Clock::now());
  return federation_view.rows(Clock::now());
}

void SiteDaemon::Impl::refresh_federation(std::set<std::string>& in_metrics) {
  std::vector<std::string> members, dead;
  for (const auto& m : transport->members()) {
    if (m.record.name == config.name || m.record.state == peer::MemberState::kLeft) continue;
    members.push_back(m.record.name);
    if (m.record.state == peer::MemberState::kDead) dead.push_back(m.record.name);
  }
  federation_view.keep_only(members, dead);
  reachability.keep_only(members);
  log_unlisted();
  log_mix_wait();
  const auto rows = federation_view.rows(Clock::now());
  std::set<std::string> shown;
  for (const auto& r : rows) {
    shown.insert(r.site);
    metrics->federation_step.with({r.site}).set(static_cast<double>(r.step));
    metrics->federation_epoch.with({r.site}).set(static_cast<double>(r.epoch));
    set_or_clear(metrics->federation_train_loss.with({r.site}), r.train_loss);
    set_or_clear(metrics->federation_test_accuracy.with({r.site}), r.test_accuracy);
    set_or_clear(metrics->federation_samples_per_second.with({r.site}), r.samples_per_second);
    set_or_clear(metrics->federation_last_heard_seconds.with({r.site}), r.last_heard_seconds);
  }
  for (const auto& name : in_metrics)
    if (!shown.contains(name)) metrics->forget_site(name);
  in_metrics = std::move(shown);

  StatusPage next;
  next.self = config.name;
  next.algorithm = algo.name();
  next.sites = rows;
  next.links = peers();
  next.curves = federation_view.curves();
  next.notes = notes();
  {
    const auto shown = live.lock();
    if (shown->total_steps) next.progress = format_run_progress(shown->pace.progress(*shown->total_steps));
    if (shown->dp_epsilon_spent) next.privacy = shown->dp_privacy_text;
  }
  *page.lock() = std::move(next);
}

std::string SiteDaemon::Impl::render_page() {
  StatusPage copy = page.copy();
  if (copy.self.empty()) copy.self = config.name;
  if (copy.algorithm.empty()) copy.algorithm = algo.name();
  return render_status_page(copy);
}

}  // namespace meridian::daemon
