// The trainer thread of a site whose trainer is attached (daemon/attached/attached_trainer.h): the same run as
// training_loop.cc (the rounds the federation agreed on, checkpoints, metrics, the progress line and
// the run's result), with each step's forward and backward pass and optimizer update done by the
// trainer process, and the algorithm's rule applied here on the shared segment.
#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include <spdlog/spdlog.h>

#include "daemon/attached/attached_trainer.h"
#include "daemon/federation/deadlines.h"
#include "daemon/status/progress_line.h"
#include "daemon/federation/round_view.h"
#include "daemon/control/shutdown_signals.h"
#include "daemon/site_daemon_impl.h"

namespace meridian::daemon {
namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

std::chrono::steady_clock::duration SiteDaemon::Impl::trainer_silence() const {
  // As long as a peer may take to answer a round: the trainer's step is this site's share of one.
  return round_timeout_bound(config);
}

bool SiteDaemon::Impl::prepare_attached() {
  make_metrics();
  const auto socket = std::filesystem::path(config.run_dir) / "trainer.sock";
  attached = std::make_unique<AttachedSession>(
      socket, config.name, std::string(algo.name()), attached_hook(settings),
      [this](TrainerRefusal cause, const std::string& message) {
        metrics->trainer_refusals.with({to_string(cause)}).inc();
        spdlog::warn("trainer refused ({}): {}", to_string(cause), message);
      });
  spdlog::info("waiting for a trainer to attach on {} (MERIDIAN_RUN_DIR={})", socket.string(), config.run_dir);
  const bool handles_signals = daemon_options.handle_signals;
  const auto stopped = [this, handles_signals] { return stop || (handles_signals && ShutdownSignals::requested()); };
  if (!attached->attach(Clock::now() + seconds_ms(config.join_timeout), stopped)) {
    attached.reset();
    return false;
  }
  metrics->trainer_attached.set(1);
  // The run's length is the trainer's: it counts the steps its loop runs. An epoch is not the
  // daemon's to know; the status counts the run as one.
  data.total_steps = attached->steps();
  data.steps_per_epoch = attached->steps();
  return true;
}

void SiteDaemon::Impl::train_attached(std::uint64_t k, std::uint64_t start_round, std::uint64_t end_round,
                                      bool resumed) {
  const auto silence = trainer_silence();
  const auto stopped = [this] { return stop.load(); };
  const TrainerHook hook = attached_hook(settings);
  // A lost trainer (killed, silent, broken) leaves a site that survives it when the site holds the
  // parameters: with the parameter and update hooks the segment has them as of the last exchange, so
  // the site stays a member, runs its rounds on them (a step without a local update: the parameters as
  // they are, a zero gradient for dts) and a trainer started again continues from them. With the
  // gradient hook (allreduce) the parameters live in the trainer alone: the site stops, as a built-in
  // site that crashed, and resumes from its checkpoint when restarted.
  const bool survives = hook != TrainerHook::kGradients;
  bool trainer_here = true;
  Clock::time_point reattach_deadline{};
  // The loss is counted with its cause (meridian_trainer_refusals_total) where the session saw it.
  const auto trainer_lost = [&](const AttachedTrainerLost& e) {
    if (!survives) throw e;
    trainer_here = false;
    reattach_deadline = Clock::now() + seconds_ms(config.join_timeout);
    metrics->trainer_attached.set(0);
    spdlog::warn("{}; the site goes on without it, a member still, and waits up to --join-timeout ({} s) for a "
                 "trainer to attach again",
                 e.what(), config.join_timeout);
  };
  const auto pull = [&] {
    if (!trainer_here) return;  // the segment holds the parameters of the last exchange
    try {
      attached->pull(silence);
    } catch (const AttachedTrainerLost& e) {
      trainer_lost(e);
    }
  };
  auto algorithm = make_attached_trainer(
      AttachedContext{settings, attached->parameters(), attached->gradients(), channel, pull,
                      schedule_of(settings, data.steps_per_epoch, end_round - start_round)});
  if (resumed) algorithm->restore(*resume);
  resume.reset();
  // A resumed site hands the trainer the checkpoint's parameters; a fresh one starts from the trainer's.
  attached->start(end_round - k, resumed);

  const bool tty = ::isatty(STDERR_FILENO) == 1;
  const auto progress_period = tty ? std::chrono::milliseconds(500) : std::chrono::milliseconds(10000);
  const auto train_start = Clock::now();
  auto last_progress = train_start;
  std::uint64_t bytes_at_last = 0;
  std::optional<double> loss_avg;
  std::uint64_t view_in_force = 0;
  std::optional<RoundView> round_view;
  if (transport) round_view.emplace(*transport, view_wait_bound(config), metrics->view_waits_given_up);
  std::uint64_t abandoned_reported = 0;
  const std::uint64_t steps_total = end_round - start_round;
  // The parameters in the segment are those of this round (the gradient hook pulls them before the
  // step's update, the parameter hook after it; the update hook writes them with the update).
  auto checkpoint_round = [&](std::uint64_t round) { return hook == TrainerHook::kGradients ? round : round + 1; };
  auto network_bytes = [&] {
    const auto s = transport ? transport->stats() : peer::TransportStats{};
    return s.bytes_sent + s.bytes_received;
  };

  for (; k < end_round && !stop; ++k) {
    if (transport) {
      transport->set_round(k);
      const auto view = round_view->for_round(k, stop);
      if (view.id != view_in_force && view.id != 0) {
        if (view_in_force != 0)
          spdlog::info("round {}: view {} in force: {}", k, view.id, join_names(view.members));
        view_in_force = view.id;
        algorithm->adopt_view(k, view);
      }
    }
    if (!trainer_here) {
      // Between rounds, a trainer started again may attach; a site that does not communicate has no
      // rounds to serve and waits for it.
      const auto deadline = algo.communicates() ? Clock::now() : reattach_deadline;
      if (attached->reattach(deadline, stopped)) {
        trainer_here = true;
        metrics->trainer_attached.set(1);
        attached->start(end_round - k, true);
        spdlog::info("round {}: the trainer attached again; {} steps left", k, end_round - k);
      } else if (stop) {
        break;
      } else if (Clock::now() >= reattach_deadline) {
        throw AttachedTrainerLost("no trainer attached again within --join-timeout; the site stops");
      }
    }
    std::optional<AttachedSession::Step> step;
    if (trainer_here) {
      try {
        step = attached->next_step(silence, stopped);
        if (!step) break;  // stopping, or the trainer said bye
      } catch (const AttachedTrainerLost& e) {
        trainer_lost(e);
      }
    }
    // Without a trainer the step has no local update: a zero gradient where the site reads one.
    if (!trainer_here && hook != TrainerHook::kParameters) std::ranges::fill(attached->gradients(), 0.0f);
    const std::uint64_t local_step = k - start_round;
    algorithm->step(k, local_step);
    const bool last = k + 1 == end_round;
    if (last) algorithm->finish();
    auto changes = algorithm->take_changes();
    if (store->due() || (last && hook != TrainerHook::kGradients)) {
      if (!changes.parameters) pull();
      if (!last) (void)write_checkpoint(*algorithm, {}, checkpoint_round(k), start_round, end_round);
    }
    if (trainer_here) {
      try {
        attached->done(changes.gradients, changes.parameters, last);
      } catch (const AttachedTrainerLost& e) {
        trainer_lost(e);
      }
    }
    if (!step) {
      metrics->step.set(static_cast<double>(local_step + 1));
      live.lock()->step = local_step + 1;
      continue;
    }

    if (step->loss) loss_avg = loss_avg ? 0.95 * *loss_avg + 0.05 * *step->loss : *step->loss;
    const std::uint64_t steps_done = local_step + 1;
    metrics->step.set(static_cast<double>(steps_done));
    metrics->epoch.set(static_cast<double>(steps_done) / static_cast<double>(data.steps_per_epoch));
    if (loss_avg) metrics->train_loss.set(*loss_avg);
    metrics->staleness_steps.set(static_cast<double>(algorithm->staleness()));
    if (const auto a = algorithm->rounds_abandoned(); a > abandoned_reported) {
      metrics->rounds_abandoned.inc(static_cast<double>(a - abandoned_reported));
      abandoned_reported = a;
    }
    {
      const auto shown = live.lock();
      shown->step = steps_done;
      shown->train_loss = loss_avg;
      shown->staleness = algorithm->staleness();
    }
    const auto now = Clock::now();
    if (now - last_progress >= progress_period || steps_done == steps_total) {
      const double dt = std::chrono::duration<double>(now - last_progress).count();
      const auto bytes = network_bytes();
      Progress p;
      p.step = steps_done;
      p.total_steps = steps_total;
      p.loss = loss_avg.value_or(0);
      p.peers_alive = transport ? static_cast<int>(transport->alive_members().size()) : 1;
      p.peers_known = transport ? static_cast<int>(std::max<std::size_t>(1, transport->members().size())) : 1;
      p.staleness = algorithm->staleness();
      p.bytes_per_second = dt > 0 ? static_cast<double>(bytes - bytes_at_last) / dt : 0;
      std::fprintf(stderr, tty ? "\r%s\x1b[K" : "%s\n", format_progress_line(p).c_str());
      std::fflush(stderr);
      last_progress = now;
      bytes_at_last = bytes;
    }
  }
  if (tty) std::fprintf(stderr, "\n");
  const bool completed = k >= end_round;
  state = SiteState::kLeaving;
  if (completed) {
    // The gradient hook's last update happens after the last exchange; the trainer sends the
    // parameters it ends with unasked.
    if (hook == TrainerHook::kGradients && trainer_here) attached->take_final_parameters(silence);
  } else {
    try {
      algorithm->finish_stopped();
    } catch (const std::exception& e) {
      spdlog::warn("stopping: abandoned the mix in flight: {}", e.what());
    }
    // The trainer that said bye left its parameters in the segment; one that is still running is
    // told the run is over, with the parameters it has now for the checkpoint.
    if (trainer_here && !attached->said_bye()) {
      try {
        attached->pull(silence);
        attached->done(false, algorithm->take_changes().parameters, true);
      } catch (const AttachedTrainerLost& e) {
        spdlog::warn("stopping: {}", e.what());
      }
    }
  }
  const double train_seconds = std::chrono::duration<double>(Clock::now() - train_start).count();
  const auto final_checkpoint_error = write_checkpoint(*algorithm, {}, k, start_round, end_round);
  metrics->trainer_attached.set(0);
  const std::string final_checkpoint = live.lock()->last_checkpoint;
  const std::uint64_t steps_done = k - start_round;
  const auto s = transport ? transport->stats() : peer::TransportStats{};
  RunResult r;
  r.site = config.name;
  r.algo = algo.name();
  r.steps = steps_done;
  r.epochs = static_cast<double>(steps_done) / static_cast<double>(data.steps_per_epoch);
  r.train_seconds = train_seconds;
  r.seconds_per_step = steps_done > 0 ? train_seconds / static_cast<double>(steps_done) : 0;
  // When the first step began (simulate's time to accuracy counts training from there).
  r.train_start = unix_seconds_now() - train_seconds;
  r.bytes_sent = s.bytes_sent;
  r.bytes_received = s.bytes_received;
  r.rounds_abandoned = algorithm->rounds_abandoned();
  r.final_checkpoint = final_checkpoint;
  r.completed = completed;
  trail->write_result(r);
  if (completed)
    spdlog::info("finished {} steps of the attached trainer in {:.1f} s; result {}", steps_done, train_seconds,
                 trail->result_file().string());
  else
    spdlog::info("stopped at round {} ({} of {} steps); checkpoint {}; result {}", k, steps_done, steps_total,
                 final_checkpoint, trail->result_file().string());
  if (final_checkpoint_error)
    throw error::UserError("the final checkpoint could not be written: " + *final_checkpoint_error);
}

}  // namespace meridian::daemon
