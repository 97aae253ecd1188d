#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <span>
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
  trainer.eval_seconds += std::chrono::duration<double>(Clock::now() - started).count();
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
  const auto shown = live.lock();
  shown->last_checkpoint = status.file.string();
  shown->checkpoint_time = Clock::now();
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
  live.lock()->shape = shape;
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

// The built-in trainer's rounds: batches, forward and backward passes, the algorithm's update, and
// what the site reports as it goes (evaluations, checkpoints, the progress line, status and metrics).
// Lives on the trainer thread for one run; reads and writes the site's state as train() did.
class SiteDaemon::Impl::BuiltinRun {
 public:
  // Makes the algorithm's trainer side, restored from the checkpoint when `resumed` (which it then
  // drops), and the batch order at the checkpoint's data position.
  BuiltinRun(Impl& site, const RunRounds& rounds, bool resumed);

  // Trains rounds [rounds.next, rounds.end) until the last, a graceful stop or the end of the privacy
  // budget, then finishes: outstanding mixes, the final evaluation, checkpoint and result. Throws
  // error::UserError for a diverged loss and for a final checkpoint that could not be written.
  void run();

 private:
  models::data::BatchPosition checkpoint_position(bool resumed) const;
  std::unique_ptr<TrainerAlgorithm> make_algorithm(bool resumed);
  // Round k_'s view, once in force (daemon/federation/round_view.h), handed to the algorithm when it
  // changes; the log says when this site switched.
  void adopt_view_of_round();
  // Whether one more step stays within the DP-SGD budget (always without DP-SGD).
  bool within_privacy_budget() const;
  // One step of round k_: a batch, the gradient, the algorithm's update; the step's time.
  void train_one_step();
  // The next batch's rows, gathered (and augmented) into x_ and labels_.
  std::span<const std::size_t> next_batch();
  // The batch's loss with its gradient left in the model; throws error::UserError when it diverged.
  float gradient(std::size_t rows);
  // This step's own time so far: since `step_start`, less the trainer's wait for mixes since then.
  Clock::duration own_time(Clock::time_point step_start, Clock::duration waited_before) const;
  void emulate_straggler(Clock::time_point step_start, Clock::duration waited_before);
  void share_step_time(Clock::time_point step_start, Clock::duration waited_before);
  // The evaluation every --eval-every steps, the progress record every few seconds between them, and
  // the periodic checkpoint.
  void evaluate_and_checkpoint_when_due(std::uint64_t steps_done);
  void record_progress(std::uint64_t steps_done, std::optional<double> measured);
  // What status, the page and /metrics show after round k_: the run's rounds done and the epochs they make.
  RunProgress publish_round();
  // The progress line, and the figures status shows next to it, over the time since the last one.
  void report_progress(Clock::time_point now, const RunProgress& progress);
  std::pair<std::uint64_t, std::uint64_t> network_bytes() const;
  // After the last step or a stop: outstanding mixes, final evaluation, checkpoint and result.json.
  void finish();
  void finish_outstanding_mixes(bool completed);
  RunResult result(bool completed, std::uint64_t steps_done, const std::string& final_checkpoint) const;
  void publish_privacy_spent();

  Impl& site_;
  const SiteConfig& config_;
  const RunRounds rounds_;
  std::uint64_t k_;  // the round trained now
  const std::uint64_t steps_total_;
  models::data::BatchOrder order_;
  std::unique_ptr<TrainerAlgorithm> algorithm_;
  const std::size_t batch_;
  const std::size_t dim_;
  // (batch, dim) and (batch), reused every step; a Poisson-sampled batch (DP-SGD) larger than any
  // before grows them.
  std::vector<float> x_;
  std::vector<std::int32_t> labels_;
  // With --augment none a plain copy of the rows; load_site_data has already refused a table with it on.
  const models::data::ImageAugmentation augmentation_;
  const std::uint64_t eval_every_;
  const bool tty_;
  const milliseconds progress_period_;

  const Clock::time_point train_start_;
  const CpuUsage cpu_at_start_;
  const Clock::duration waited_at_start_;
  Clock::time_point last_progress_;
  std::uint64_t samples_since_ = 0;
  std::uint64_t bytes_at_last_ = 0;
  double loss_avg_ = 0;  // exponential moving average of the batch loss
  bool have_loss_ = false;
  std::optional<double> accuracy_;
  std::uint64_t abandoned_reported_ = 0;
  bool budget_spent_ = false;
  // Set by finish(): what the step loop cost, and the time it and the outstanding mixes after it took.
  CpuUsage loop_cpu_;
  Clock::duration loop_waited_{};
  double train_seconds_ = 0;
  double finish_seconds_ = 0;

  // A record carries a test accuracy only when it was measured at that step, so readers never take an
  // old evaluation for a new one. Between evaluations a record without one goes out every few seconds:
  // `simulate` follows the steps from these files, and a run that evaluates rarely must still show them.
  static constexpr std::chrono::seconds kRecordPeriod{5};
  Clock::time_point last_record_;

  std::uint64_t view_in_force_ = 0;
  std::optional<RoundView> round_view_;
  // This site's compute time of a step (waits for the network excluded), smoothed, shared with the
  // members for shapes chosen from the network (peer/pace.h).
  const bool shares_step_time_;
  std::optional<double> step_seconds_;
  std::uint64_t steps_timed_ = 0;
  Clock::time_point last_step_time_sent_;
};

void SiteDaemon::Impl::train() {
  const bool resumed = resume.has_value();
  // A finished run continued to a longer --epochs starts like a new run (its sites agree on the rounds
  // again) from the checkpoint's model, optimizer state and data position.
  const bool continued = resumed && trainer.added_steps > 0;
  // A finished run that --epochs does not make longer has nothing to train and no view to wait for
  // (its peers may be gone for good).
  const bool finished = resumed && !continued && resume->step >= resume->end_round;
  RunRounds rounds;
  if (!algo.communicates() || finished) {
    rounds = rounds_from_checkpoint();
    if (finished) {
      if (algo.communicates()) tell_members_the_run_ended(rounds);
      // Nothing was trained: the run's result and checkpoints stay as the run left them (a supervisor's
      // restart must not replace its figures with an empty run's).
      finished_before = true;
      spdlog::info("the run had finished before this start (round {}): result {} kept; exit code {}", rounds.end,
                   trail->result_file().string(), kExitRunFinishedBefore);
      return;
    }
  } else {
    const auto joined = join_the_run(resumed, continued);
    if (!joined) return;
    rounds = *joined;
  }
  publish_run_start(rounds);
  settle_normalization(resumed);
  if (stop) return;
  state = SiteState::kTraining;
  if (transport) transport->start_partition_clock();
  if (attached) {
    train_attached(rounds.next, rounds.start, rounds.end, resumed);
    return;
  }
  BuiltinRun(*this, rounds, resumed).run();
}

SiteDaemon::Impl::RunRounds SiteDaemon::Impl::rounds_from_checkpoint() const {
  RunRounds rounds{0, data.total_steps, 0, 0};
  if (resume) {
    rounds.start = resume->start_round;
    rounds.end = resume->end_round + trainer.added_steps;
    rounds.next = resume->step;
  }
  return rounds;
}

void SiteDaemon::Impl::tell_members_the_run_ended(const RunRounds& rounds) {
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
        if (m != config.name) transport->send(m, plan_message({data.total_steps, rounds.end, rounds.start}));
      next_send = Clock::now() + std::chrono::seconds(1);
    }
    if (!heard && !plans.snapshot().empty()) {
      heard = true;
      until = std::min(until, Clock::now() + std::chrono::seconds(1));
    }
    std::this_thread::sleep_for(milliseconds(50));
  }
}

std::optional<SiteDaemon::Impl::RunRounds> SiteDaemon::Impl::join_the_run(bool resumed, bool continued) {
  warm_buffers();
  // Automatic shapes: the views carry the federation's pace, and the first one it trains in should
  // have this site's step time already (peer/membership.h).
  if (algo.shape_from_network(settings))
    if (const auto step = time_steps_before_training()) transport->set_step_time(*step);
  if (!wait_for_view(resumed && !continued)) return std::nullopt;
  const auto view = transport->latest_view();
  RunRounds rounds;
  if (continued) {
    rounds = continue_finished_run(view);
  } else if (resumed) {
    rounds = rejoin_from_checkpoint(view);
  } else {
    rounds.start = view.effective_round;
    rounds.end = agree_end_round(view, data.total_steps);
    rounds.next = rounds.start;
  }
  // Before run_end: a joining site that hears the end from this one hears the start with it.
  run_start = std::min(trainer.joined_run_start.value_or(rounds.start), rounds.start);
  run_end = rounds.end;
  return rounds;
}

SiteDaemon::Impl::RunRounds SiteDaemon::Impl::continue_finished_run(const peer::View& view) {
  RunRounds rounds;
  const std::uint64_t done = resume->end_round - resume->start_round;
  // Views come after the checkpoint's round (the transport resumed there); max() only guards the
  // arithmetic below.
  rounds.next = std::max(view.effective_round, resume->end_round);
  rounds.end = agree_end_round(view, trainer.added_steps);
  if (rounds.end <= rounds.next) {
    spdlog::warn(
        "the federation does not continue the finished run (another site's run has ended): restart every "
        "site with the longer --epochs to continue it");
    rounds.end = rounds.next;
  } else {
    spdlog::info("continuing the finished run from round {} to round {} ({})", rounds.next, rounds.end,
                 format_count(rounds.end - rounds.next, "more step"));
  }
  // The run counts from its first step: the schedule, the step count and a later restart's --epochs
  // go on from the steps the finished run did.
  rounds.start = rounds.next - done;
  return rounds;
}

SiteDaemon::Impl::RunRounds SiteDaemon::Impl::rejoin_from_checkpoint(const peer::View& view) {
  RunRounds rounds;
  rounds.start = resume->start_round;
  rounds.end = resume->end_round;
  const auto from = std::max<std::uint64_t>(trainer.taken_back_at.value_or(view.effective_round), resume->step);
  // A view that takes this site back after one without it starts exactly where the peers first
  // need it: they ran the rounds before without it. Peers that wait for nobody (sgp) may be further
  // on: there the site joins at the round they are mixing if that is later.
  rounds.next = !trainer.taken_back_at          ? rejoin_round(view, from)
                : !algo.peers_wait_for_rejoin() ? std::max(from, rejoin_round(view, from))
                                                : from;
  spdlog::info("rejoining at round {} (checkpoint at round {})", rounds.next, resume->step);
  return rounds;
}

void SiteDaemon::Impl::publish_run_start(RunRounds& rounds) {
  // Rounds count from the run's first round, as the federation counts them: a site that joined a
  // running federation shows the others' round, not its own few steps.
  rounds.first = std::min(trainer.joined_run_start.value_or(rounds.start), rounds.start);
  run_start = rounds.first;  // also for a finished run that answers plans (serve_control)
  const std::uint64_t done = rounds.next - rounds.first;
  {
    const auto shown = live.lock();
    shown->step = done;
    shown->epoch = done / std::max<std::uint64_t>(data.steps_per_epoch, 1);
    shown->total_steps = rounds.end - rounds.first;
    shown->pace.note(done, Clock::now());
  }
  metrics->total_steps.set(static_cast<double>(rounds.end - rounds.first));
}

SiteDaemon::Impl::BuiltinRun::BuiltinRun(Impl& site, const RunRounds& rounds, bool resumed)
    : site_(site),
      config_(site.config),
      rounds_(rounds),
      k_(rounds.next),
      steps_total_(rounds.end - rounds.start),
      order_(site.data.train.rows, site.data_seed(), checkpoint_position(resumed)),
      algorithm_(make_algorithm(resumed)),
      batch_(static_cast<std::size_t>(config_.batch)),
      dim_(site.data.train.dim),
      x_(batch_ * dim_),
      labels_(batch_),
      augmentation_(site.data.train, site.settings.augmentation, site.data_seed()),
      eval_every_(config_.eval_every > 0 ? static_cast<std::uint64_t>(config_.eval_every) : site.data.steps_per_epoch),
      tty_(::isatty(STDERR_FILENO) == 1),
      progress_period_(tty_ ? milliseconds(500) : milliseconds(10000)),
      train_start_(Clock::now()),
      cpu_at_start_(CpuUsage::now()),
      waited_at_start_(site.channel.trainer_waited()),
      last_progress_(train_start_),
      last_record_(train_start_),
      shares_step_time_(site.transport && site.algo.shape_from_network(site.settings)),
      last_step_time_sent_(train_start_) {
  if (site_.transport)
    round_view_.emplace(*site_.transport, view_wait_bound(config_), site_.metrics->view_waits_given_up);
}

models::data::BatchPosition SiteDaemon::Impl::BuiltinRun::checkpoint_position(bool resumed) const {
  models::data::BatchPosition position;
  if (resumed)
    position = {site_.resume->epoch,
                static_cast<std::size_t>(std::min<std::uint64_t>(site_.resume->data_position, site_.data.train.rows))};
  return position;
}

std::unique_ptr<TrainerAlgorithm> SiteDaemon::Impl::BuiltinRun::make_algorithm(bool resumed) {
  auto& model = *site_.model;
  auto algorithm = site_.algo.make_trainer(
      algorithms::TrainerContext{site_.settings, model, site_.backend, site_.channel,
                                 schedule_of(site_.settings, site_.data.steps_per_epoch, rounds_.end - rounds_.start)});
  if (resumed) {
    const Checkpoint& resume = *site_.resume;
    algorithm->restore(resume);
    // Every algorithm's trainer reads the statistics from the model when it mixes them, so restoring
    // them in the model is enough. A checkpoint written before `start` saved them has none: the model
    // keeps its initial ones, with a warning (the fingerprint, which counts them, matched already).
    if (resume.model_state.size() == model.state_count()) {
      if (!resume.model_state.empty()) model.write_state(resume.model_state);
    } else if (resume.model_state.empty()) {
      spdlog::warn("the checkpoint holds no normalization statistics; this model's {} start from their initial values",
                   model.state_count());
    } else {
      throw CheckpointError("checkpoint model state holds " + std::to_string(resume.model_state.size()) +
                            " values, this model needs " + std::to_string(model.state_count()));
    }
  }
  site_.resume.reset();
  return algorithm;
}

void SiteDaemon::Impl::BuiltinRun::run() {
  for (; k_ < rounds_.end && !site_.stop; ++k_) {
    if (site_.transport) adopt_view_of_round();
    // Before the step, never after it: a step whose noisy gradient would take the privacy spent above
    // the budget is not taken at all.
    if (!within_privacy_budget()) {
      spdlog::warn(
          "round {}: DP-SGD budget reached: one more step would spend more than epsilon {}; training "
          "stops here with {}",
          k_, *site_.dp->options().epsilon_budget, site_.dp_spent_text());
      budget_spent_ = true;
      break;
    }
    train_one_step();
    const std::uint64_t steps_done = k_ - rounds_.start + 1;
    evaluate_and_checkpoint_when_due(steps_done);
    const RunProgress progress = publish_round();
    const auto now = Clock::now();
    if (now - last_progress_ >= progress_period_ || steps_done == steps_total_) report_progress(now, progress);
  }
  finish();
}

void SiteDaemon::Impl::BuiltinRun::adopt_view_of_round() {
  site_.transport->set_round(k_);
  const auto view = round_view_->for_round(k_, site_.stop);
  if (view.id == view_in_force_ || view.id == 0) return;
  if (view_in_force_ != 0)
    spdlog::info("round {}: view {} in force: {} ({}){}", k_, view.id, join_names(view.members),
                 format_count(view.size(), "site"),
                 view.rank_of(config_.name) ? "" : "; not in it: training alone until a view takes this site back");
  view_in_force_ = view.id;
  const auto before = algorithm_->chosen_shape();
  algorithm_->adopt_view(k_, view);
  if (const auto shape = algorithm_->chosen_shape(); shape && shape != before) site_.note_shape(*shape, before);
}

bool SiteDaemon::Impl::BuiltinRun::within_privacy_budget() const {
  return !site_.dp || site_.dp->next_step_within_budget();
}

void SiteDaemon::Impl::BuiltinRun::train_one_step() {
  const auto step_start = Clock::now();
  const auto waited_before = site_.channel.trainer_waited();
  const auto rows = next_batch();
  const float loss = gradient(rows.size());
  algorithm_->step(k_, k_ - rounds_.start);
  if (config_.slowdown > 1) emulate_straggler(step_start, waited_before);
  if (shares_step_time_) share_step_time(step_start, waited_before);
  loss_avg_ = have_loss_ ? 0.95 * loss_avg_ + 0.05 * loss : loss;
  have_loss_ = true;
  samples_since_ += rows.size();
}

std::span<const std::size_t> SiteDaemon::Impl::BuiltinRun::next_batch() {
  // Batches never straddle epochs, so the position after next() names the batch's epoch. DP-SGD
  // samples each step's rows itself (Poisson), its epochs counted in steps.
  const auto rows = site_.dp ? site_.dp->sample() : order_.next(batch_);
  const std::uint64_t data_epoch =
      site_.dp ? (k_ - rounds_.start) / site_.data.steps_per_epoch : order_.position().epoch;
  if (rows.size() > labels_.size()) {
    x_.resize(rows.size() * dim_);
    labels_.resize(rows.size());
  }
  augmentation_.gather(rows, data_epoch, x_.data(), labels_.data());
  return rows;
}

float SiteDaemon::Impl::BuiltinRun::gradient(std::size_t rows) {
  std::optional<float> step_loss;
  if (site_.dp) {
    step_loss = site_.dp->gradient(*site_.model, x_.data(), labels_.data(), rows);
    site_.metrics->dp_epsilon_spent.set(site_.dp->spent().epsilon);
  } else {
    step_loss = site_.model->forward_backward(x_.data(), labels_.data(), rows);
  }
  // An empty Poisson batch has no loss; the last one stands in for the average.
  const float loss = step_loss.value_or(have_loss_ ? static_cast<float>(loss_avg_) : 0.0f);
  if (!std::isfinite(loss)) {
    throw error::UserError("training diverged at round " + std::to_string(k_) + " (loss " + std::to_string(loss) +
                           "); try a smaller --lr");
  }
  return loss;
}

Clock::duration SiteDaemon::Impl::BuiltinRun::own_time(Clock::time_point step_start,
                                                       Clock::duration waited_before) const {
  const auto waited = site_.channel.trainer_waited() - waited_before;
  return std::max(Clock::duration::zero(), Clock::now() - step_start - waited);
}

void SiteDaemon::Impl::BuiltinRun::emulate_straggler(Clock::time_point step_start, Clock::duration waited_before) {
  // An emulated straggler: the whole step (batch, compute, update, its share of the mixing work)
  // takes `slowdown` times as long, but not the time spent waiting for the mix, which is the
  // other sites' pace and the network's, not this site's.
  std::this_thread::sleep_for(own_time(step_start, waited_before) * (config_.slowdown - 1));
}

void SiteDaemon::Impl::BuiltinRun::share_step_time(Clock::time_point step_start, Clock::duration waited_before) {
  // The first steps fault in buffers and warm caches: they would overstate the step time.
  const double own = std::chrono::duration<double>(own_time(step_start, waited_before)).count();
  if (++steps_timed_ > 3) step_seconds_ = step_seconds_ ? 0.9 * *step_seconds_ + 0.1 * own : own;
  if (step_seconds_ && Clock::now() - last_step_time_sent_ >= milliseconds(500)) {
    site_.transport->set_step_time(std::chrono::microseconds(static_cast<std::int64_t>(*step_seconds_ * 1e6)));
    last_step_time_sent_ = Clock::now();
  }
}

void SiteDaemon::Impl::BuiltinRun::evaluate_and_checkpoint_when_due(std::uint64_t steps_done) {
  if (steps_done % eval_every_ == 0 && steps_done < steps_total_) {
    double test_loss = 0;
    accuracy_ = site_.evaluate(test_loss);
    if (accuracy_) site_.metrics->test_accuracy.set(*accuracy_);
    record_progress(steps_done, accuracy_);
  } else if (Clock::now() - last_record_ >= kRecordPeriod && steps_done < steps_total_) {
    record_progress(steps_done, std::nullopt);
  }
  if (site_.store->due())
    (void)site_.write_checkpoint(*algorithm_, order_.position(), k_ + 1, rounds_.start, rounds_.end);
}

void SiteDaemon::Impl::BuiltinRun::record_progress(std::uint64_t steps_done, std::optional<double> measured) {
  const auto [sent, received] = network_bytes();
  site_.trail->append_progress(
      ProgressRecord{unix_seconds_now(), config_.name, steps_done,
                     static_cast<double>(steps_done) / static_cast<double>(site_.data.steps_per_epoch), loss_avg_,
                     measured, sent, received, site_.trainer.eval_seconds});
  last_record_ = Clock::now();
}

RunProgress SiteDaemon::Impl::BuiltinRun::publish_round() {
  const std::uint64_t rounds_done = k_ + 1 - rounds_.first;
  const double epoch = static_cast<double>(rounds_done) / static_cast<double>(site_.data.steps_per_epoch);
  RunProgress run_progress;
  {
    const auto shown = site_.live.lock();
    shown->step = rounds_done;
    shown->epoch = static_cast<std::uint64_t>(epoch);
    shown->pace.note(rounds_done, Clock::now());
    run_progress = shown->pace.progress(rounds_.end - rounds_.first);
  }
  auto& metrics = *site_.metrics;
  metrics.step.set(static_cast<double>(rounds_done));
  metrics.epoch.set(epoch);
  metrics.progress_ratio.set(run_progress.percent / 100);
  if (run_progress.eta_seconds) metrics.eta_seconds.set(*run_progress.eta_seconds);
  metrics.train_loss.set(loss_avg_);
  metrics.push_sum_weight.set(algorithm_->push_sum_weight());
  metrics.staleness_steps.set(static_cast<double>(algorithm_->staleness()));
  if (const auto a = algorithm_->rounds_abandoned(); a > abandoned_reported_) {
    metrics.rounds_abandoned.inc(static_cast<double>(a - abandoned_reported_));
    abandoned_reported_ = a;
  }
  return run_progress;
}

void SiteDaemon::Impl::BuiltinRun::report_progress(Clock::time_point now, const RunProgress& progress) {
  const std::uint64_t rounds_done = k_ + 1 - rounds_.first;
  const double epoch = static_cast<double>(rounds_done) / static_cast<double>(site_.data.steps_per_epoch);
  const double dt = std::chrono::duration<double>(now - last_progress_).count();
  const auto [sent, received] = network_bytes();
  const double sps = dt > 0 ? static_cast<double>(samples_since_) / dt : 0;
  const double bps = dt > 0 ? static_cast<double>(sent + received - bytes_at_last_) / dt : 0;
  site_.metrics->samples_per_second.set(sps);
  const auto& transport = site_.transport;
  Progress p;
  p.step = rounds_done;
  p.total_steps = rounds_.end - rounds_.first;
  p.eta_seconds = progress.eta_seconds;
  p.epoch = static_cast<std::uint64_t>(epoch);
  p.total_epochs = static_cast<std::uint64_t>(std::ceil(config_.epochs));
  p.loss = loss_avg_;
  p.accuracy = accuracy_;
  p.peers_alive = transport ? static_cast<int>(transport->alive_members().size()) : 1;
  p.peers_known = transport ? static_cast<int>(std::max<std::size_t>(1, transport->members().size())) : 1;
  p.staleness = algorithm_->staleness();
  p.bytes_per_second = bps;
  const auto line = format_progress_line(p);
  if (tty_) {
    std::fprintf(stderr, "\r%s\x1b[K", line.c_str());
  } else {
    std::fprintf(stderr, "%s\n", line.c_str());
  }
  std::fflush(stderr);
  {
    const auto shown = site_.live.lock();
    shown->train_loss = loss_avg_;
    shown->test_accuracy = accuracy_;
    if (site_.dp) {
      shown->dp_epsilon_spent = site_.dp->spent().epsilon;
      shown->dp_privacy_text = site_.dp_spent_text();
    }
    shown->staleness = algorithm_->staleness();
    shown->push_sum_weight = algorithm_->push_sum_weight();
    shown->samples_per_second = sps;
    shown->bytes_per_second = bps;
  }
  last_progress_ = now;
  samples_since_ = 0;
  bytes_at_last_ = sent + received;
}

std::pair<std::uint64_t, std::uint64_t> SiteDaemon::Impl::BuiltinRun::network_bytes() const {
  const auto s = site_.transport ? site_.transport->stats() : peer::TransportStats{};
  return {s.bytes_sent, s.bytes_received};
}

void SiteDaemon::Impl::BuiltinRun::finish() {
  if (tty_) std::fprintf(stderr, "\n");
  const bool completed = k_ >= rounds_.end;
  site_.state = SiteState::kLeaving;
  const auto finish_start = Clock::now();
  loop_cpu_ = CpuUsage::now() - cpu_at_start_;
  loop_waited_ = site_.channel.trainer_waited() - waited_at_start_;
  finish_outstanding_mixes(completed);
  train_seconds_ = std::chrono::duration<double>(Clock::now() - train_start_).count();
  finish_seconds_ = std::chrono::duration<double>(Clock::now() - finish_start).count();
  double test_loss = 0;
  accuracy_ = site_.evaluate(test_loss);
  if (accuracy_) site_.metrics->test_accuracy.set(*accuracy_);
  const auto final_checkpoint_error =
      site_.write_checkpoint(*algorithm_, order_.position(), k_, rounds_.start, rounds_.end);
  const std::uint64_t steps_done = k_ - rounds_.start;
  record_progress(steps_done, accuracy_);
  const std::string final_checkpoint = site_.live.lock()->last_checkpoint;
  const RunResult r = result(completed, steps_done, final_checkpoint);
  site_.trail->write_result(r);
  if (site_.dp) publish_privacy_spent();
  // The run's end is reported as usual; a final checkpoint that could not be written then makes the
  // daemon exit with an error, so that a supervisor notices the site's last state is not durable.
  auto fail_if_final_checkpoint_missing = [&] {
    if (!final_checkpoint_error) return;
    throw error::UserError("the final checkpoint could not be written: " + *final_checkpoint_error +
                           "; the newest valid checkpoint is " +
                           (final_checkpoint.empty() ? std::string("none (none was ever written)") : final_checkpoint));
  };
  const std::string result_file = site_.trail->result_file().string();
  if (!completed) {
    spdlog::info("stopped at round {} ({} of {} steps{}); checkpoint {}; result {}", k_, steps_done, steps_total_,
                 budget_spent_ ? ", the privacy budget spent" : "", final_checkpoint, result_file);
    fail_if_final_checkpoint_missing();
    return;
  }
  spdlog::info("finished {} steps in {:.1f} s; test accuracy {}; result {}", steps_done, train_seconds_,
               accuracy_ ? std::to_string(*accuracy_) : std::string("n/a"), result_file);
  std::printf("test accuracy %s (%s, %llu steps, %.1f s)\n", accuracy_ ? std::to_string(*accuracy_).c_str() : "n/a",
              std::string(site_.algo.name()).c_str(), static_cast<unsigned long long>(steps_done), train_seconds_);
  std::fflush(stdout);
  fail_if_final_checkpoint_missing();
}

void SiteDaemon::Impl::BuiltinRun::finish_outstanding_mixes(bool completed) {
  try {
    if (completed) algorithm_->finish();
    else algorithm_->finish_stopped();
  } catch (const std::exception& e) {
    if (completed) throw;
    // Stopping: the round in flight may never complete (peers gone); its correction is abandoned.
    spdlog::warn("stopping: abandoned the mix in flight: {}", e.what());
  }
}

RunResult SiteDaemon::Impl::BuiltinRun::result(bool completed, std::uint64_t steps_done,
                                               const std::string& final_checkpoint) const {
  const auto [sent, received] = network_bytes();
  RunResult r;
  r.site = config_.name;
  r.algo = site_.algo.name();
  r.steps = steps_done;
  r.epochs = static_cast<double>(steps_done) / static_cast<double>(site_.data.steps_per_epoch);
  r.train_seconds = train_seconds_;
  r.seconds_per_step = steps_done > 0 ? train_seconds_ / static_cast<double>(steps_done) : 0;
  r.finish_seconds = finish_seconds_;
  r.loop_wait_seconds = std::chrono::duration<double>(loop_waited_).count();
  r.loop_trainer_cpu_seconds = loop_cpu_.thread_seconds;
  r.loop_process_cpu_seconds = loop_cpu_.process_seconds;
  r.loop_minor_faults = loop_cpu_.minor_faults;
  r.train_start =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count() - train_seconds_;
  r.test_accuracy = accuracy_;
  if (site_.dp) {
    r.dp_epsilon = site_.dp->spent().epsilon;
    r.dp_delta = site_.dp->options().delta;
  }
  r.push_sum_weight = algorithm_->push_sum_weight();
  r.bytes_sent = sent;
  r.bytes_received = received;
  r.rounds_abandoned = algorithm_->rounds_abandoned();
  r.final_checkpoint = final_checkpoint;
  r.completed = completed;
  return r;
}

void SiteDaemon::Impl::BuiltinRun::publish_privacy_spent() {
  const double epsilon = site_.dp->spent().epsilon;
  site_.metrics->dp_epsilon_spent.set(epsilon);
  {
    const auto shown = site_.live.lock();
    shown->dp_epsilon_spent = epsilon;
    shown->dp_privacy_text = site_.dp_spent_text();
  }
  spdlog::info("DP-SGD: {}", site_.dp_spent_text());
}

}  // namespace meridian::daemon
