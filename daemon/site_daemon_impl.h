// SiteDaemon's inside (daemon/site_daemon.h), shared by the files that implement it, one concept each:
//   site_daemon.cc     set-up (device, data, model, checkpoints, transport), the communication thread, and
//                      run(), which starts and joins the threads
//   site_daemon_transport.cc  the default transport: ZeroMQ from the settings
//   start_protocol.cc  before the first step: waiting for the view, the round a rejoining site starts at,
//                      agreeing on the run's last round
//   normalization_agreement.cc  before the first step: the input scaling every site uses
//   training_loop.cc   the trainer thread: steps, evaluations, checkpoints, progress and the result
//   attached_training.cc  the same with --trainer attached: the steps of a trainer in another process
//   site_status.cc     the control thread: status, peers and leave over the control socket, signals,
//                      network metrics
//   site_federation.cc the federation view: summaries to and from the peers, its metrics, the status page
//   site_roster.cc     roster changes while the site runs (`meridian roster`, SIGHUP)
// The threads are described in daemon/site_daemon.h. Impl's state is in parts, each saying which
// threads touch it:
//   - what run() builds before the threads start (data, model, store, transport, metrics, ...): read by
//     every thread afterwards, changed by none but through its own thread-safe interface;
//   - atomics and thread-safe values any thread may use (state, stop, the run's rounds, the rounds the
//     trainer observes, plans, scaling, reachability, the adaptive deadlines); trainer_error and
//     finished_before, written by the trainer before it sets trainer_done;
//   - Guarded values (daemon/guarded.h), reachable only under their lock: live (trainer → control),
//     page (control → metrics server), waiting_note (trainer → control), mix_server (communication →
//     control), secure_roster (control → communication);
//   - ControlState `control`, the control thread's own, and TrainerState `trainer`, the trainer's own.
// Private to daemon/.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "daemon/algorithms/registry.h"
#include "daemon/attached/attached_session.h"
#include "daemon/checkpoint/checkpoint_store.h"
#include "daemon/control/control_server.h"
#include "daemon/federation/deadlines.h"
#include "daemon/guarded.h"
#include "daemon/metrics/daemon_metrics.h"
#include "daemon/files/directory_lock.h"
#include "daemon/federation/federation_view.h"
#include "daemon/federation/input_scaling_exchange.h"
#include "daemon/metrics/metrics_server.h"
#include "privacy/budget_record.h"
#include "privacy/dp_sgd.h"
#include "daemon/federation/min_sites.h"
#include "daemon/federation/reachability.h"
#include "daemon/federation/run_plan.h"
#include "daemon/status/run_progress.h"
#include "daemon/status/run_trail.h"
#include "daemon/site_daemon.h"
#include "daemon/site_data.h"
#include "daemon/status/status_page.h"
#include "daemon/trainer_algorithm.h"
#include "error/error.h"
#include "gossip/mix_channel.h"
#include "gossip/mix_server.h"
#include "models/data/batch_order.h"
#include "models/data/seeded_random.h"
#include "models/model.h"
#include "peer/federation_transport.h"
#include "peer/roster.h"
#include "privacy/secure_aggregation_counters.h"

namespace meridian::daemon {

// Where the site is in its life, for `meridian status`.
enum class SiteState { kJoining, kTraining, kLeaving, kStopped };
inline const char* to_string(SiteState s) {
  switch (s) {
    case SiteState::kJoining: return "joining";
    case SiteState::kTraining: return "training";
    case SiteState::kLeaving: return "leaving";
    case SiteState::kStopped: return "stopped";
  }
  return "?";
}

// What the trainer publishes for the control socket, the status page and the federation summary
// (Impl::live).
struct LiveStatus {
  std::uint64_t step = 0;  // rounds of this run done, counted from the run's first round (RunProgress)
  std::uint64_t epoch = 0;
  std::optional<std::uint64_t> total_steps;  // the run's rounds once agreed
  RunPace pace;                              // the rounds done, noted as they go
  std::optional<double> train_loss;  // these three: none before the first progress report
  std::optional<double> test_accuracy;
  std::optional<double> dp_epsilon_spent;  // DP-SGD only; budget in the settings
  std::string dp_privacy_text;             // DP-SGD only: Impl::dp_spent_text()
  std::uint64_t staleness = 0;
  double push_sum_weight = 1;
  std::optional<double> samples_per_second;
  std::optional<double> bytes_per_second;
  std::string last_checkpoint;
  std::optional<std::chrono::steady_clock::time_point> checkpoint_time;
  std::optional<algorithms::ChosenShape> shape;  // a shape chosen from the network; none for a fixed one
};

struct SiteDaemon::Impl final : ControlHandler {
  Impl(SiteSettings s, SiteDaemonOptions o)
      : settings(std::move(s)),
        config(settings.options),
        algo(settings.algorithm()),
        daemon_options(std::move(o)) {}

  const SiteSettings settings;
  const SiteConfig& config;                // settings.options: names, addresses, paths, numbers
  const algorithms::Algorithm& algo;       // what this site runs (daemon/algorithms/)
  const SiteDaemonOptions daemon_options;  // the transport factory and signal handling
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
  // Declared before the metrics server, whose threads read them until it is destroyed.
  FederationView federation_view{config.name, started};  // written by the control thread
  // What the status page shows: the control thread refreshes it, the metrics server's threads render it.
  Guarded<StatusPage> page;

  // Built by run() before the threads start.
  std::optional<DirectoryLock> run_lock, checkpoint_lock;
  SiteData data;
  std::shared_ptr<models::Backend> backend;
  std::unique_ptr<models::Model> model;
  std::string model_file;          // the text of the model file --model names; "" for a built-in model
  std::vector<float> model_state;  // (state) host copy of the model's state for checkpoints
  std::unique_ptr<CheckpointStore> store;
  std::optional<Checkpoint> resume;
  std::optional<SiteIdentity> identity;  // a secure site on ZeroMQ: read before the data
  std::unique_ptr<peer::FederationTransport> transport;
  std::unique_ptr<DaemonMetrics> metrics;
  std::unique_ptr<MetricsServer> metrics_server;
  std::unique_ptr<RunTrail> trail;
  gossip::MixChannel channel;

  // Shared between the threads.
  std::atomic<SiteState> state{SiteState::kJoining};
  std::atomic<bool> stop{false};  // graceful stop asked (signal or `meridian leave`)
  std::atomic<bool> trainer_done{false};
  std::exception_ptr trainer_error;                // written by the trainer before trainer_done
  bool finished_before = false;                    // written by the trainer: the run had ended before this start
  std::atomic<bool> observe_rounds{false};         // the trainer wants to know which round peers mix
  std::atomic<std::uint64_t> observed_round{0};    // round + 1 of the first mixer message seen; 0: none
  std::atomic<std::uint64_t> observe_min_view{0};  // only messages of this view or newer count
  // Written by the trainer thread after its steps and checkpoints; read by the control thread, which
  // also notes the pace of a stalled run when asked for status.
  Guarded<LiveStatus> live;
  PeerPlans plans;          // heard by the control thread (daemon/federation/run_plan.h)
  ScalingExchange scaling;  // noted by the control thread (daemon/federation/input_scaling_exchange.h)
  // The run's end round once the trainer knows it (a finished run's, from its checkpoint, at start); 0 before.
  std::atomic<std::uint64_t> run_end{0};
  // The run's first round once the trainer knows it (with run_end): what a joining site counts from.
  std::atomic<std::uint64_t> run_start{0};
  // --secure-aggregation (privacy/): what the masked mixers count, and the roster their pair secrets
  // look peers' keys up in (a copy of the roster in force: the communication thread reads it, the
  // control thread replaces it).
  privacy::SecureAggregationCounters secure_counters;
  Guarded<std::optional<peer::Roster>> secure_roster;
  // Sites the view must hold before training starts, fixed at start (daemon/federation/min_sites.h).
  MinSites min_sites;
  // Who reaches whom as far as this site knows (daemon/federation/reachability.h): noted and shared by the
  // control thread, read for the waiting line and status.
  Reachability reachability{config.name, std::nullopt};
  // The trainer's latest waiting line while it waits for the view; the control thread shows it.
  Guarded<std::string> waiting_note;
  // --round-timeout auto and --heartbeat-timeout auto (daemon/federation/deadlines.h): what the deadlines follow,
  // made with the transport; null for a given number.
  std::shared_ptr<peer::AdaptiveDeadline> round_deadline, heartbeat_deadline;
  // The communication thread's mix server while it runs (null before and after), for the control
  // thread's note on a mix that waits.
  Guarded<const gossip::MixServer*> mix_server{nullptr};

  // The control thread's own state (site_status.cc, site_federation.cc, site_roster.cc). The set-up loads
  // the roster in force before the threads start; after that no other thread touches it.
  struct ControlState {
    std::optional<peer::Roster> roster_in_force;  // secure mode
    // The secure aggregation events already exported as metrics.
    std::array<std::uint64_t, privacy::kSecureAggregationEvents.size()> secure_reported{};
    std::set<std::string> unlisted_logged;         // members others hold that this roster lacks, logged once
    std::optional<std::uint64_t> mix_wait_logged;  // the step of the mix last logged
  } control;

  // The trainer thread's own state (training_loop.cc, start_protocol.cc).
  // prepare() sets added_steps before the threads start; after that no other thread touches it.
  struct TrainerState {
    // A finished run resumed with a longer --epochs: the steps it adds (its checkpoint's run ended
    // before the run this --epochs gives would); 0 otherwise.
    std::uint64_t added_steps = 0;
    // Set by wait_for_view: the first round of the view that took this site back after one without it.
    std::optional<std::uint64_t> taken_back_at;
    // Set by agree_end_round for a site that joins a running federation: the run's first round.
    std::optional<std::uint64_t> joined_run_start;
    double eval_seconds = 0;  // spent in evaluate() so far: progress records carry it
  } trainer;

  // --- ControlHandler (called on the control thread; site_status.cc) ---
  StatusReport status() override;
  // What stands in this site's way as far as it knows (StatusReport::notes), and this site's own
  // reach report (daemon/federation/reachability.h).
  std::vector<std::string> notes();
  ReachReport own_reach() const;
  // "; as far as this site knows: CAUSE, CAUSE" for the sites that do not reach each other, or "" when
  // nothing is known; appended to the messages of a start that cannot complete.
  std::string known_causes() const;
  // Members other sites hold that this site's roster lacks: logged once each (control thread).
  void log_unlisted();
  // The mix the communication thread's server runs now, if any.
  std::optional<gossip::MixInFlight> mix_in_flight();
  // The mix that has waited a second or more for its peers, for people: which round, for whom, since
  // when, and the deadline in force; nullopt when no mix waits that long (site_status.cc).
  std::optional<std::string> mix_wait_note();
  // Logs mix_wait_note() once per mix that has waited five seconds (control thread).
  void log_mix_wait();
  std::vector<PeerReport> peers() override;
  LeaveReport leave() override;
  std::vector<SiteRow> federation() override;                // site_federation.cc
  RosterReport roster(const RosterChange& change) override;  // site_roster.cc

  // --- set-up ---
  void prepare();
  // The newest checkpoint of the model with `fingerprint`, and what --epochs does with it.
  void load_checkpoint(const std::string& fingerprint);
  void make_metrics();
  void make_transport();

  // --- DP-SGD (--dp-*; dp_training.cc) ---
  // Refuses a model or backend that cannot clip per example, before anything else is set up for it.
  void check_dp_model();
  // Makes dp from the settings and the checkpoint's sealed budget (a resumed site keeps what it spent);
  // throws error::UserError for a checkpoint whose budget is missing, altered, or from another setting.
  void prepare_dp();
  // The sealed budget record for a checkpoint of `round` (empty without DP); valid until the next call.
  std::span<const std::uint8_t> sealed_budget(std::uint64_t round);
  // "epsilon 1.23 of 3 spent (delta 1e-05, 120 steps)" for logs and the status page.
  std::string dp_spent_text() const;
  std::unique_ptr<privacy::DpSgd> dp;  // null without DP-SGD
  std::unique_ptr<privacy::BudgetSeal> budget_seal;
  std::vector<std::uint8_t> budget_bytes;

  // --- --trainer attached (attached_training.cc) ---
  bool attached_trainer() const { return config.trainer == "attached"; }
  // The attachment, made by prepare_attached(); null with the built-in trainer.
  std::unique_ptr<AttachedSession> attached;
  // Waits for the trainer's hello; false when stopped first (attached stays null).
  bool prepare_attached();
  // The trainer thread's loop from round k of the run [start_round, end_round).
  void train_attached(std::uint64_t k, std::uint64_t start_round, std::uint64_t end_round, bool resumed);
  // How long the trainer may stay silent between its messages.
  std::chrono::steady_clock::duration trainer_silence() const;

  // --- trainer thread (training_loop.cc) ---
  // The trainer thread: settles the run's rounds (with the federation, or from the checkpoint), then
  // trains them with the built-in trainer (BuiltinRun) or serves an attached trainer's (train_attached).
  void train();
  // The rounds a run spans at this site, as the trainer settles them before its first step.
  struct RunRounds {
    std::uint64_t start = 0;  // the run's first round at this site: its local step 0, where the schedule starts
    std::uint64_t end = 0;    // the run's end round (exclusive)
    std::uint64_t next = 0;   // the round this site trains first
    // The run's first round as the federation counts it (before `start` for a site that joined a running
    // federation); set by publish_run_start.
    std::uint64_t first = 0;
  };
  // The built-in trainer's rounds, from the first step to the result (training_loop.cc).
  class BuiltinRun;
  // The rounds of a run that does not communicate, or of a finished one: the checkpoint's, or a fresh
  // run's from round 0.
  RunRounds rounds_from_checkpoint() const;
  // A finished run: tells the members of a federation that forms around it the run's end, so that sites
  // restarted to continue it hear that it has ended; returns when that is done or nobody comes.
  void tell_members_the_run_ended(const RunRounds& rounds);
  // Waits for a view with this site and settles the run's rounds with its members; nullopt when
  // stopped first.
  std::optional<RunRounds> join_the_run(bool resumed, bool continued);
  // A finished run continued to a longer --epochs, from the checkpoint at its end.
  RunRounds continue_finished_run(const peer::View& view);
  // A site that resumes from its checkpoint into a running federation.
  RunRounds rejoin_from_checkpoint(const peer::View& view);
  // Sets rounds.first, and publishes where the run starts for status and /metrics.
  void publish_run_start(RunRounds& rounds);
  void warm_buffers();
  // This site's compute time of a training step before training starts (nullopt without training
  // rows), timed on a model of its own so that the one training starts from is untouched.
  std::optional<std::chrono::microseconds> time_steps_before_training();
  bool wait_for_view(bool resumed);  // false when stopped while waiting
  std::uint64_t rejoin_round(const peer::View& view, std::uint64_t fallback);
  // The run's end round, agreed with the view's members when each proposes `steps` from the view's round.
  // A site that joins a running federation learns the run's first round too (trainer.joined_run_start).
  std::uint64_t agree_end_round(const peer::View& view, std::uint64_t steps);
  // Scales data.train and data.test as the federation agreed when the scaling is pending (SiteData);
  // throws PeerError when a member's moments do not come.
  void settle_normalization(bool resumed);
  // Returns the error when the checkpoint could not be written (logged and counted already).
  std::optional<std::string> write_checkpoint(const TrainerAlgorithm& algorithm, models::data::BatchPosition position,
                                              std::uint64_t round, std::uint64_t start_round, std::uint64_t end_round);
  std::optional<double> evaluate(double& test_loss);
  // The trainer's algorithm runs `shape` now (it was `before`): logged, and published for status and
  // metrics.
  void note_shape(const algorithms::ChosenShape& shape, const std::optional<algorithms::ChosenShape>& before);

  // --- communication thread ---
  void communicate();
  // --- control thread: the control socket, signals, network metrics ---
  void serve_control();
  // The federation view (site_federation.cc): this site's summary, sent to the live members; the view
  // trimmed to the members; its metrics and the status page refreshed.
  SiteRow own_summary();
  void share_summary();
  void refresh_federation(std::set<std::string>& in_metrics);
  std::string render_page();
  // SIGHUP: reads the roster file again; logs the outcome (site_roster.cc).
  void reload_roster_on_signal();
  void refresh_network_metrics(std::map<std::string, std::pair<std::uint64_t, std::uint64_t>>& last_bytes,
                               std::array<std::uint64_t, peer::kRejectCauseCount>& last_rejected,
                               std::uint64_t& last_zap_denied);

  // Milliseconds of a --*-timeout given in seconds.
  static std::chrono::milliseconds seconds_ms(double s) {
    return std::chrono::milliseconds(static_cast<long long>(std::llround(s * 1000.0)));
  }
  static std::string join_names(const std::vector<std::string>& names) {
    std::string out;
    for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
    return out;
  }
  std::uint64_t data_seed() const {
    return models::data::SeededRandom::derive(config.seed,
                                              0x6d657269ull + static_cast<std::uint64_t>(config.site_index));
  }
};

}  // namespace meridian::daemon
