#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <thread>

#include <spdlog/spdlog.h>

#include "daemon/status/cpu_usage.h"
#include "daemon/federation/deadlines.h"
#include "daemon/status/human_format.h"
#include "daemon/status/progress_line.h"
#include "daemon/federation/round_view.h"
#include "daemon/site_daemon_impl.h"
#include "models/data/image_augmentation.h"
#include "models/model_factory.h"
#include "models/thread_policy.h"

namespace meridian::daemon {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

}  // namespace

std::optional<double> SiteDaemon::Impl::evaluate(double& test_loss) {
  if (data.test.rows == 0) return std::nullopt;
  const auto started = Clock::now();
  const auto e = model->evaluate(data.test);
  eval_seconds += std::chrono::duration<double>(Clock::now() - started).count();
  test_loss = e.loss;
  return e.accuracy;
}

std::optional<std::string> SiteDaemon::Impl::write_checkpoint(const TrainerAlgorithm& algorithm,
                                                              models::data::BatchPosition position,
                                                              std::uint64_t round, std::uint64_t start_round,
                                                              std::uint64_t end_round) {
  const std::uint64_t seed = data_seed();
  std::array<std::uint8_t, 8> rng{};
  for (int i = 0; i < 8; ++i) rng[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(seed >> (8 * i));
  CheckpointView v;
  v.parameters = algorithm.checkpoint_parameters();
  v.optimizer_state = algorithm.checkpoint_state();
  v.push_sum_weight = algorithm.push_sum_weight();
  v.push_sum_weight_average = algorithm.push_sum_weight_average();
  v.step = round;
  v.epoch = position.epoch;
  v.data_position = position.offset;
  v.rng_state = rng;
  // An attached trainer's model is the one it declared (daemon/attached/attached_model.h).
  v.model_fingerprint = model ? model->fingerprint() : attached->model().fingerprint();
  v.algorithm = algo.name();
  v.start_round = start_round;
  v.end_round = end_round;
  // What `meridian eval` and `meridian export` need besides the parameters, as `meridian train --save`
  // writes it: batch norm's running statistics, the inputs' standardization and the model file's text.
  model_state.resize(model ? model->state_count() : 0);
  if (!model_state.empty()) model->read_state(model_state);
  v.model_state = model_state;
  v.input_mean = data.train.standardization.mean;
  v.input_stddev = data.train.standardization.stddev;
  v.model_file = model_file;
  // The names and the table preprocessing agreed at join, so that an exported model takes a raw row.
  v.inputs.feature_names = data.train.feature_names;
  v.inputs.class_names = data.train.class_names;
  v.inputs.table = data.train.table;
  v.privacy_budget = sealed_budget(round);
  const auto status = store->write(v);
  for (const auto& w : status.warnings) spdlog::warn("{}", w);
  if (!status.ok) {
    metrics->checkpoint_failures.inc();
    // Training goes on (the previous checkpoints are intact: the store never leaves a partial file);
    // the store retries once per --checkpoint-interval.
    spdlog::error("checkpoint failed, training goes on with the previous checkpoint kept: {}", status.error);
    return status.error;
  }
  metrics->checkpoints_written.inc();
  metrics->checkpoint_written();
  std::lock_guard lock(live_mu);
  live.last_checkpoint = status.file.string();
  live.checkpoint_time = Clock::now();
  return std::nullopt;
}

void SiteDaemon::Impl::note_shape(const algorithms::ChosenShape& shape,
                                  const std::optional<algorithms::ChosenShape>& before) {
  const bool switched = !before || before->text != shape.text;
  if (switched)
    spdlog::info("round {}: {} runs {} (automatic, from view {}: {})", shape.from_round, algo.name(), shape.text,
                 shape.view_id, algorithms::describe_pace(shape.pace));
  else
    spdlog::debug("view {}: {} keeps {} ({})", shape.view_id, algo.name(), shape.text,
                  algorithms::describe_pace(shape.pace));
  {
    std::lock_guard lock(live_mu);
    live.shape = shape;
  }
  if (shape.delay != 0) metrics->shape_delay_steps.set(shape.delay);
  if (shape.period != 0) metrics->shape_period_steps.set(shape.period);
  if (shape.tau != 0) metrics->shape_tau_steps.set(shape.tau);
  if (shape.pace.measured()) {
    metrics->shape_round_trip_seconds.set(static_cast<double>(shape.pace.rtt_us) / 1e6);
    metrics->shape_step_seconds.set(static_cast<double>(shape.pace.step_us) / 1e6);
  }
}

void SiteDaemon::Impl::warm_buffers() {
  // The first touch of a fresh model-sized buffer faults in every page of it: on the 2-core VM of
  // docs/results.md about 9.5 ms of CPU per 2 MB (against 0.1 ms to write it again), as much as a
  // whole step's compute there. A run keeps a handful of such buffers in flight (shares on the
  // emulated links and in the inbox, snapshots and mix results in the channel) and faulted each in
  // during its first steps. They are made now, while the site waits for its peers: the transport's
  // pool and the channel's spares hand them out later (heap_retention.h keeps what is freed).
  // Sized with the normalization statistics, which the mixes of the algorithms that average them carry.
  const std::size_t elements = model ? model->parameter_count() + model->state_count() : attached->model().parameters;
  const auto [channel_elements, share_elements] = algo.buffer_sizes(settings, elements);
  constexpr std::size_t kBudgetBytes = std::size_t{256} << 20;
  constexpr std::size_t kChannelBuffers = 6, kTransportBuffers = 8;
  std::size_t budget = kBudgetBytes;
  auto affordable = [&](std::size_t elements) {
    if (elements * sizeof(float) > budget) return false;
    budget -= elements * sizeof(float);
    return true;
  };
  for (std::size_t i = 0; i < kChannelBuffers && affordable(channel_elements); ++i)
    channel.recycle(std::vector<float>(channel_elements));
  for (std::size_t i = 0; i < kTransportBuffers && affordable(share_elements); ++i)
    transport->recycle(std::vector<float>(share_elements));
}

std::optional<std::chrono::microseconds> SiteDaemon::Impl::time_steps_before_training() {
  if (data.train.rows == 0) return std::nullopt;
  // A model of the same architecture and threads, not a copy of the trained one: a forward and backward
  // pass moves batch norm's running statistics and dropout's draws, which the run's model must start
  // without. The optimizer's update is left out (a small share of a step); the steps the trainer times
  // later replace this figure (peer/pace.h's margin decides whether the view's pace follows).
  const models::Shape input = data.train.channels > 0
                                  ? models::Shape{data.train.channels, data.train.height, data.train.width}
                                  : models::Shape{data.train.dim, 1, 1};
  const std::vector<std::size_t> widths(config.widths.begin(), config.widths.end());
  const auto timed_model = models::make_model(config.model, input, data.train.classes, widths, backend, config.seed);
  const int threads =
      config.threads > 0 ? config.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  models::use_threads(*timed_model, *backend, static_cast<std::size_t>(threads));

  const std::size_t batch = std::min<std::size_t>(static_cast<std::size_t>(config.batch), data.train.rows);
  std::vector<float> x(batch * data.train.dim);
  std::vector<std::int32_t> labels(batch);
  models::data::BatchOrder order(data.train.rows, data_seed(), {});
  const models::data::ImageAugmentation augmentation(data.train, settings.augmentation, data_seed());
  // The first steps fault in the activations and warm the caches, as the trainer's first steps do
  // (it leaves three out of its figure too).
  constexpr int kUntimed = 2, kTimed = 3;
  Clock::duration spent{};
  for (int i = 0; i < kUntimed + kTimed && !stop; ++i) {
    const auto started = Clock::now();
    const auto rows = order.next(batch);
    augmentation.gather(rows, order.position().epoch, x.data(), labels.data());
    (void)timed_model->forward_backward(x.data(), labels.data(), rows.size());
    if (i >= kUntimed) spent += Clock::now() - started;
  }
  if (stop) return std::nullopt;
  // An emulated straggler's steps take `slowdown` times as long (see train()).
  const double seconds = std::chrono::duration<double>(spent).count() / kTimed * std::max(1.0, config.slowdown);
  const auto step = std::chrono::microseconds(std::max<std::int64_t>(1, std::llround(seconds * 1e6)));
  spdlog::info("step time before training: {:.3g} ms (from {} warm-up steps)", seconds * 1e3, kTimed);
  return step;
}

void SiteDaemon::Impl::train() {
  const bool resumed = resume.has_value();
  // A finished run continued to a longer --epochs starts like a new run (its sites agree on the rounds
  // again) from the checkpoint's model, optimizer state and data position.
  const bool continued = resumed && added_steps > 0;
  // A finished run that --epochs does not make longer has nothing to train and no view to wait for
  // (its peers may be gone for good).
  const bool finished = resumed && !continued && resume->step >= resume->end_round;
  std::uint64_t start_round = 0, end_round = data.total_steps, k = 0;
  if (!algo.communicates() || finished) {
    if (resumed) {
      start_round = resume->start_round;
      end_round = resume->end_round + added_steps;
      k = resume->step;
    }
    if (finished && algo.communicates()) {
      // It stays while a federation forms around it, telling the members its run's end (daemon/federation/run_plan.h)
      // so that sites restarted to continue the run hear that it has ended; it goes a second after it
      // hears a plan back (the answer to a starting site's plan goes out from serve_control), after
      // membership's grace for a site alone when nobody comes, and at the latest when a starting
      // site's wait for plans would be over.
      const auto now = Clock::now();
      const auto alone = now + 2 * heartbeat_timeout_bound(config) +
                         std::max(milliseconds(1000), 2 * heartbeat_milliseconds(config.heartbeat_interval));
      auto until = alone + round_timeout_bound(config) + std::chrono::seconds(10);
      auto next_send = now;
      bool heard = false;
      while (!stop && Clock::now() < until) {
        const auto members = transport->alive_members();
        if (Clock::now() >= alone && members.size() <= 1) break;
        if (Clock::now() >= next_send) {
          for (const auto& m : members)
            if (m != config.name) transport->send(m, plan_message({data.total_steps, end_round, start_round}));
          next_send = Clock::now() + std::chrono::seconds(1);
        }
        if (!heard && !plans.snapshot().empty()) {
          heard = true;
          until = std::min(until, Clock::now() + std::chrono::seconds(1));
        }
        std::this_thread::sleep_for(milliseconds(50));
      }
    }
    if (finished) {
      // Nothing was trained: the run's result and checkpoints stay as the run left them (a supervisor's
      // restart must not replace its figures with an empty run's).
      finished_before = true;
      spdlog::info("the run had finished before this start (round {}): result {} kept; exit code {}", end_round,
                   trail->result_file().string(), kExitRunFinishedBefore);
      return;
    }
  } else {
    warm_buffers();
    // Automatic shapes: the views carry the federation's pace, and the first one it trains in should
    // have this site's step time already (peer/membership.h).
    if (algo.shape_from_network(settings))
      if (const auto step = time_steps_before_training()) transport->set_step_time(*step);
    if (!wait_for_view(resumed && !continued)) return;
    const auto view = transport->latest_view();
    if (continued) {
      const std::uint64_t done = resume->end_round - resume->start_round;
      // Views come after the checkpoint's round (the transport resumed there); max() only guards the
      // arithmetic below.
      k = std::max(view.effective_round, resume->end_round);
      end_round = agree_end_round(view, added_steps);
      if (end_round <= k) {
        spdlog::warn(
            "the federation does not continue the finished run (another site's run has ended): restart every "
            "site with the longer --epochs to continue it");
        end_round = k;
      } else {
        spdlog::info("continuing the finished run from round {} to round {} ({})", k, end_round,
                     format_count(end_round - k, "more step"));
      }
      // The run counts from its first step: the schedule, the step count and a later restart's --epochs
      // go on from the steps the finished run did.
      start_round = k - done;
    } else if (resumed) {
      start_round = resume->start_round;
      end_round = resume->end_round;
      const auto from = std::max<std::uint64_t>(taken_back_at.value_or(view.effective_round), resume->step);
      // A view that takes this site back after one without it starts exactly where the peers first
      // need it: they ran the rounds before without it. Peers that wait for nobody (sgp) may be further
      // on: there the site joins at the round they are mixing if that is later.
      k = !taken_back_at                  ? rejoin_round(view, from)
          : !algo.peers_wait_for_rejoin() ? std::max(from, rejoin_round(view, from))
                                          : from;
      spdlog::info("rejoining at round {} (checkpoint at round {})", k, resume->step);
    } else {
      start_round = view.effective_round;
      end_round = agree_end_round(view, data.total_steps);
      k = start_round;
    }
    // Before run_end: a joining site that hears the end from this one hears the start with it.
    run_start = std::min(joined_run_start.value_or(start_round), start_round);
    run_end = end_round;
  }
  // Rounds count from the run's first round, as the federation counts them: a site that joined a
  // running federation shows the others' round, not its own few steps.
  const std::uint64_t first_round = std::min(joined_run_start.value_or(start_round), start_round);
  run_start = first_round;  // also for a finished run that answers plans (serve_control)
  {
    std::lock_guard lock(live_mu);
    live.step = k - first_round;
    live.epoch = (k - first_round) / std::max<std::uint64_t>(data.steps_per_epoch, 1);
    live.total_steps = end_round - first_round;
    live.pace.note(k - first_round, Clock::now());
  }
  metrics->total_steps.set(static_cast<double>(end_round - first_round));
  settle_normalization(resumed);
  if (stop) return;
  state = SiteState::kTraining;
  if (transport) transport->start_partition_clock();
  if (attached) {
    train_attached(k, start_round, end_round, resumed);
    return;
  }

  models::data::BatchPosition position;
  if (resumed)
    position = {resume->epoch,
                static_cast<std::size_t>(std::min<std::uint64_t>(resume->data_position, data.train.rows))};
  models::data::BatchOrder order(data.train.rows, data_seed(), position);
  auto algorithm = algo.make_trainer(algorithms::TrainerContext{
      settings, *model, backend, channel, schedule_of(settings, data.steps_per_epoch, end_round - start_round)});
  if (resumed) {
    algorithm->restore(*resume);
    // Every algorithm's trainer reads the statistics from the model when it mixes them, so restoring
    // them in the model is enough. A checkpoint written before `start` saved them has none: the model
    // keeps its initial ones, with a warning (the fingerprint, which counts them, matched already).
    if (resume->model_state.size() == model->state_count()) {
      if (!resume->model_state.empty()) model->write_state(resume->model_state);
    } else if (resume->model_state.empty()) {
      spdlog::warn("the checkpoint holds no normalization statistics; this model's {} start from their initial values",
                   model->state_count());
    } else {
      throw CheckpointError("checkpoint model state holds " + std::to_string(resume->model_state.size()) +
                            " values, this model needs " + std::to_string(model->state_count()));
    }
  }
  resume.reset();

  const std::size_t batch = static_cast<std::size_t>(config.batch);
  const std::size_t dim = data.train.dim;
  // (batch, dim) and (batch), reused every step; a Poisson-sampled batch (DP-SGD) larger than any
  // before grows them.
  std::vector<float> x(batch * dim);
  std::vector<std::int32_t> labels(batch);
  bool budget_spent = false;
  // With --augment none a plain copy of the rows; load_site_data has already refused a table with it on.
  const models::data::ImageAugmentation augmentation(data.train, settings.augmentation, data_seed());
  const std::uint64_t eval_every =
      config.eval_every > 0 ? static_cast<std::uint64_t>(config.eval_every) : data.steps_per_epoch;
  const bool tty = ::isatty(STDERR_FILENO) == 1;
  const auto progress_period = tty ? milliseconds(500) : milliseconds(10000);

  const auto train_start = Clock::now();
  const auto cpu_at_start = CpuUsage::now();
  const auto waited_at_start = channel.trainer_waited();
  auto last_progress = train_start;
  std::uint64_t samples_since = 0;
  std::uint64_t bytes_at_last = 0;
  double loss_avg = 0;  // exponential moving average of the batch loss
  bool have_loss = false;
  std::optional<double> accuracy;
  std::uint64_t abandoned_reported = 0;
  const std::uint64_t steps_total = end_round - start_round;

  auto network_bytes = [&] {
    const auto s = transport ? transport->stats() : peer::TransportStats{};
    return std::pair<std::uint64_t, std::uint64_t>{s.bytes_sent, s.bytes_received};
  };
  // A record carries a test accuracy only when it was measured at that step, so readers never take an
  // old evaluation for a new one. Between evaluations a record without one goes out every few seconds:
  // `simulate` follows the steps from these files, and a run that evaluates rarely must still show them.
  const auto record_period = std::chrono::seconds(5);
  auto last_record = train_start;
  auto record_progress = [&](std::uint64_t steps_done, std::optional<double> measured) {
    const auto [sent, received] = network_bytes();
    trail->append_progress(ProgressRecord{unix_seconds_now(), config.name, steps_done,
                                          static_cast<double>(steps_done) / static_cast<double>(data.steps_per_epoch),
                                          loss_avg, measured, sent, received, eval_seconds});
    last_record = Clock::now();
  };

  std::uint64_t view_in_force = 0;
  std::optional<RoundView> round_view;
  if (transport) round_view.emplace(*transport, view_wait_bound(config), metrics->view_waits_given_up);
  // This site's compute time of a step (waits for the network excluded), smoothed, shared with the
  // members for shapes chosen from the network (peer/pace.h).
  const bool shares_step_time = transport && algo.shape_from_network(settings);
  std::optional<double> step_seconds;
  std::uint64_t steps_timed = 0;
  auto last_step_time_sent = train_start;
  for (; k < end_round && !stop; ++k) {
    if (transport) {
      transport->set_round(k);
      // Views change at the round they announced, once in force (daemon/federation/round_view.h); the log says
      // when this site switched.
      const auto view = round_view->for_round(k, stop);
      if (view.id != view_in_force && view.id != 0) {
        if (view_in_force != 0)
          spdlog::info(
              "round {}: view {} in force: {} ({}){}", k, view.id, join_names(view.members),
              format_count(view.size(), "site"),
              view.rank_of(config.name) ? "" : "; not in it: training alone until a view takes this site back");
        view_in_force = view.id;
        const auto before = algorithm->chosen_shape();
        algorithm->adopt_view(k, view);
        if (const auto shape = algorithm->chosen_shape(); shape && shape != before) note_shape(*shape, before);
      }
    }
    // Before the step, never after it: a step whose noisy gradient would take the privacy spent above
    // the budget is not taken at all.
    if (dp && !dp->next_step_within_budget()) {
      spdlog::warn("round {}: DP-SGD budget reached: one more step would spend more than epsilon {}; training "
                   "stops here with {}",
                   k, *dp->options().epsilon_budget, dp_spent_text());
      budget_spent = true;
      break;
    }
    const auto step_start = Clock::now();
    const auto waited_before = channel.trainer_waited();
    // Batches never straddle epochs, so the position after next() names the batch's epoch. DP-SGD
    // samples each step's rows itself (Poisson), its epochs counted in steps.
    const auto rows = dp ? dp->sample() : order.next(batch);
    const std::uint64_t data_epoch = dp ? (k - start_round) / data.steps_per_epoch : order.position().epoch;
    if (rows.size() > labels.size()) {
      x.resize(rows.size() * dim);
      labels.resize(rows.size());
    }
    augmentation.gather(rows, data_epoch, x.data(), labels.data());
    std::optional<float> step_loss;
    if (dp) {
      step_loss = dp->gradient(*model, x.data(), labels.data(), rows.size());
      metrics->dp_epsilon_spent.set(dp->spent().epsilon);
    } else {
      step_loss = model->forward_backward(x.data(), labels.data(), rows.size());
    }
    // An empty Poisson batch has no loss; the last one stands in for the average.
    const float loss = step_loss.value_or(have_loss ? static_cast<float>(loss_avg) : 0.0f);
    if (!std::isfinite(loss)) {
      throw error::UserError("training diverged at round " + std::to_string(k) + " (loss " + std::to_string(loss) +
                             "); try a smaller --lr");
    }
    const std::uint64_t local_step = k - start_round;
    algorithm->step(k, local_step);
    if (config.slowdown > 1) {
      // An emulated straggler: the whole step (batch, compute, update, its share of the mixing work)
      // takes `slowdown` times as long, but not the time spent waiting for the mix, which is the
      // other sites' pace and the network's, not this site's.
      const auto waited = channel.trainer_waited() - waited_before;
      const auto own = std::max(Clock::duration::zero(), Clock::now() - step_start - waited);
      std::this_thread::sleep_for(own * (config.slowdown - 1));
    }
    if (shares_step_time) {
      // The first steps fault in buffers and warm caches: they would overstate the step time.
      const auto waited = channel.trainer_waited() - waited_before;
      const double own =
          std::chrono::duration<double>(std::max(Clock::duration::zero(), Clock::now() - step_start - waited)).count();
      if (++steps_timed > 3) step_seconds = step_seconds ? 0.9 * *step_seconds + 0.1 * own : own;
      if (step_seconds && Clock::now() - last_step_time_sent >= milliseconds(500)) {
        transport->set_step_time(std::chrono::microseconds(static_cast<std::int64_t>(*step_seconds * 1e6)));
        last_step_time_sent = Clock::now();
      }
    }
    loss_avg = have_loss ? 0.95 * loss_avg + 0.05 * loss : loss;
    have_loss = true;
    samples_since += rows.size();
    const std::uint64_t steps_done = local_step + 1;

    if (steps_done % eval_every == 0 && steps_done < steps_total) {
      double test_loss = 0;
      accuracy = evaluate(test_loss);
      if (accuracy) metrics->test_accuracy.set(*accuracy);
      record_progress(steps_done, accuracy);
    } else if (Clock::now() - last_record >= record_period && steps_done < steps_total) {
      record_progress(steps_done, std::nullopt);
    }
    if (store->due()) (void)write_checkpoint(*algorithm, order.position(), k + 1, start_round, end_round);

    // What status, the page and /metrics show: the run's rounds done and the epochs they make.
    const std::uint64_t rounds_done = k + 1 - first_round;
    const double epoch = static_cast<double>(rounds_done) / static_cast<double>(data.steps_per_epoch);
    RunProgress run_progress;
    {
      std::lock_guard lock(live_mu);
      live.step = rounds_done;
      live.epoch = static_cast<std::uint64_t>(epoch);
      live.pace.note(rounds_done, Clock::now());
      run_progress = live.pace.progress(end_round - first_round);
    }
    metrics->step.set(static_cast<double>(rounds_done));
    metrics->epoch.set(epoch);
    metrics->progress_ratio.set(run_progress.percent / 100);
    if (run_progress.eta_seconds) metrics->eta_seconds.set(*run_progress.eta_seconds);
    metrics->train_loss.set(loss_avg);
    metrics->push_sum_weight.set(algorithm->push_sum_weight());
    metrics->staleness_steps.set(static_cast<double>(algorithm->staleness()));
    if (const auto a = algorithm->rounds_abandoned(); a > abandoned_reported) {
      metrics->rounds_abandoned.inc(static_cast<double>(a - abandoned_reported));
      abandoned_reported = a;
    }
    const auto now = Clock::now();
    if (now - last_progress >= progress_period || steps_done == steps_total) {
      const double dt = std::chrono::duration<double>(now - last_progress).count();
      const auto [sent, received] = network_bytes();
      const double sps = dt > 0 ? static_cast<double>(samples_since) / dt : 0;
      const double bps = dt > 0 ? static_cast<double>(sent + received - bytes_at_last) / dt : 0;
      metrics->samples_per_second.set(sps);
      Progress p;
      p.step = rounds_done;
      p.total_steps = end_round - first_round;
      p.eta_seconds = run_progress.eta_seconds;
      p.epoch = static_cast<std::uint64_t>(epoch);
      p.total_epochs = static_cast<std::uint64_t>(std::ceil(config.epochs));
      p.loss = loss_avg;
      p.accuracy = accuracy;
      p.peers_alive = transport ? static_cast<int>(transport->alive_members().size()) : 1;
      p.peers_known = transport ? static_cast<int>(std::max<std::size_t>(1, transport->members().size())) : 1;
      p.staleness = algorithm->staleness();
      p.bytes_per_second = bps;
      const auto line = format_progress_line(p);
      if (tty) {
        std::fprintf(stderr, "\r%s\x1b[K", line.c_str());
      } else {
        std::fprintf(stderr, "%s\n", line.c_str());
      }
      std::fflush(stderr);
      {
        std::lock_guard lock(live_mu);
        live.train_loss = loss_avg;
        live.test_accuracy = accuracy;
        if (dp) {
          live.dp_epsilon_spent = dp->spent().epsilon;
          live.dp_privacy_text = dp_spent_text();
        }
        live.staleness = algorithm->staleness();
        live.push_sum_weight = algorithm->push_sum_weight();
        live.samples_per_second = sps;
        live.bytes_per_second = bps;
      }
      last_progress = now;
      samples_since = 0;
      bytes_at_last = sent + received;
    }
  }
  if (tty) std::fprintf(stderr, "\n");
  const bool completed = k >= end_round;
  state = SiteState::kLeaving;
  const auto finish_start = Clock::now();
  const auto loop_cpu = CpuUsage::now() - cpu_at_start;
  const auto loop_waited = channel.trainer_waited() - waited_at_start;
  try {
    if (completed) algorithm->finish();
    else algorithm->finish_stopped();
  } catch (const std::exception& e) {
    if (completed) throw;
    // Stopping: the round in flight may never complete (peers gone); its correction is abandoned.
    spdlog::warn("stopping: abandoned the mix in flight: {}", e.what());
  }
  const double train_seconds = std::chrono::duration<double>(Clock::now() - train_start).count();
  const double finish_seconds = std::chrono::duration<double>(Clock::now() - finish_start).count();
  double test_loss = 0;
  accuracy = evaluate(test_loss);
  if (accuracy) metrics->test_accuracy.set(*accuracy);
  const auto final_checkpoint_error = write_checkpoint(*algorithm, order.position(), k, start_round, end_round);
  const std::uint64_t steps_done = k - start_round;
  record_progress(steps_done, accuracy);
  std::string final_checkpoint;
  {
    std::lock_guard lock(live_mu);
    final_checkpoint = live.last_checkpoint;
  }
  // The run's end is reported as usual; a final checkpoint that could not be written then makes the
  // daemon exit with an error, so that a supervisor notices the site's last state is not durable.
  auto fail_if_final_checkpoint_missing = [&] {
    if (!final_checkpoint_error) return;
    throw error::UserError("the final checkpoint could not be written: " + *final_checkpoint_error +
                           "; the newest valid checkpoint is " +
                           (final_checkpoint.empty() ? std::string("none (none was ever written)") : final_checkpoint));
  };
  const auto [sent, received] = network_bytes();
  RunResult r;
  r.site = config.name;
  r.algo = algo.name();
  r.steps = steps_done;
  r.epochs = static_cast<double>(steps_done) / static_cast<double>(data.steps_per_epoch);
  r.train_seconds = train_seconds;
  r.seconds_per_step = steps_done > 0 ? train_seconds / static_cast<double>(steps_done) : 0;
  r.finish_seconds = finish_seconds;
  r.loop_wait_seconds = std::chrono::duration<double>(loop_waited).count();
  r.loop_trainer_cpu_seconds = loop_cpu.thread_seconds;
  r.loop_process_cpu_seconds = loop_cpu.process_seconds;
  r.loop_minor_faults = loop_cpu.minor_faults;
  r.train_start =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count() - train_seconds;
  r.test_accuracy = accuracy;
  if (dp) {
    r.dp_epsilon = dp->spent().epsilon;
    r.dp_delta = dp->options().delta;
  }
  r.push_sum_weight = algorithm->push_sum_weight();
  r.bytes_sent = sent;
  r.bytes_received = received;
  r.rounds_abandoned = algorithm->rounds_abandoned();
  r.final_checkpoint = final_checkpoint;
  r.completed = completed;
  trail->write_result(r);
  if (dp) {
    metrics->dp_epsilon_spent.set(dp->spent().epsilon);
    std::lock_guard lock(live_mu);
    live.dp_epsilon_spent = dp->spent().epsilon;
    live.dp_privacy_text = dp_spent_text();
  }
  if (dp) spdlog::info("DP-SGD: {}", dp_spent_text());
  if (!completed) {
    spdlog::info("stopped at round {} ({} of {} steps{}); checkpoint {}; result {}", k, steps_done, steps_total,
                 budget_spent ? ", the privacy budget spent" : "", final_checkpoint, trail->result_file().string());
    fail_if_final_checkpoint_missing();
    return;
  }
  spdlog::info("finished {} steps in {:.1f} s; test accuracy {}; result {}", steps_done, train_seconds,
               accuracy ? std::to_string(*accuracy) : std::string("n/a"), trail->result_file().string());
  std::printf("test accuracy %s (%s, %llu steps, %.1f s)\n", accuracy ? std::to_string(*accuracy).c_str() : "n/a",
              std::string(algo.name()).c_str(), static_cast<unsigned long long>(steps_done), train_seconds);
  std::fflush(stdout);
  fail_if_final_checkpoint_missing();
}

}  // namespace meridian::daemon
