#include "daemon/site_daemon.h"

#include <algorithm>
#include <fstream>
#include <iterator>
#include <thread>

#include <spdlog/spdlog.h>

#include "daemon/backend/compute_backend.h"
#include "daemon/federation/federation_terms.h"
#include "daemon/status/human_format.h"
#include "daemon/control/reload_signal.h"
#include "daemon/control/shutdown_signals.h"
#include "daemon/site_daemon_impl.h"
#include "gossip/average_mixer.h"
#include "gossip/byzantine_mixer.h"
#include "gossip/inbox.h"
#include "gossip/mix_server.h"
#include "models/device.h"
#include "models/model_factory.h"
#include "models/thread_policy.h"
#include "privacy/secure_mean_mixer.h"

namespace meridian::daemon {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// The transport compares a 64-bit model fingerprint in every message header; FNV-1a of the model's
// text fingerprint gives every site the same number for the same architecture.
std::uint64_t fingerprint_hash(const std::string& text) {
  std::uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

}  // namespace

void SiteDaemon::Impl::prepare() {
  // --device first, so that a CUDA request without a device fails at once with the reason and a hint.
  // The model, its gradients and optimizer state live on the chosen backend; gossip/ sees host copies of
  // them (daemon/backend/host_mirror.h).
  const auto device = models::resolve_device(settings.device, models::probe_cuda());
  spdlog::info("device: {}", device.explanation);
  // Before any work: loading the data can take minutes, and this site could not be reached anyway.
  if (const auto problem = unreachable_address_problem(config))
    throw SiteConfigError("invalid site configuration:\n  " + *problem);
  // The key pair and the roster too: a missing or unreadable one would otherwise show only after the
  // data has loaded. (A transport factory of the caller's, such as the in-memory network, needs neither.)
  // Secure aggregation needs the key pair whatever the transport: its pair secrets come from it.
  if (!config.insecure && (!daemon_options.transport || config.secure_aggregation))
    identity = read_site_identity(config);
  run_lock = DirectoryLock::acquire(config.run_dir);
  const std::filesystem::path checkpoint_dir = config.checkpoint_dir_or_default();
  if (!config.checkpoint_dir.empty()) checkpoint_lock = DirectoryLock::acquire(checkpoint_dir);
  trail = std::make_unique<RunTrail>(config.run_dir);

  if (attached_trainer()) {
    // The model is the trainer's: it declares it when it attaches (daemon/attached_training.cc).
    if (!prepare_attached()) return;
    load_checkpoint(attached->model().fingerprint());
    return;
  }
  data = load_site_data(settings);
  spdlog::info("data: {} rows of {} in this site's part ({} of {}, {}), test {} rows; {} steps per epoch, {} steps",
               data.train.rows, config.train.empty() ? config.dataset : config.train, config.site_index,
               config.site_count, config.partition, data.test.rows, data.steps_per_epoch, data.total_steps);
  spdlog::info("classes in this site's part: {}", class_counts(data.train));

  const int threads =
      config.threads > 0 ? config.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  backend = make_backend(device.device);
  const models::Shape input = data.train.channels > 0
                                  ? models::Shape{data.train.channels, data.train.height, data.train.width}
                                  : models::Shape{data.train.dim, 1, 1};
  std::vector<std::size_t> widths(config.widths.begin(), config.widths.end());
  model = models::make_model(config.model, input, data.train.classes, widths, backend, config.seed);
  // Checkpoints carry a model file's text, so that `meridian eval` and `export` rebuild the network
  // without it; read once, as the model was built from it now.
  if (const auto& builtins = models::builtin_models();
      std::find(builtins.begin(), builtins.end(), config.model) == builtins.end()) {
    std::ifstream in(config.model, std::ios::binary);
    model_file.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  models::use_threads(*model, *backend, static_cast<std::size_t>(threads));
  if (config.dp()) check_dp_model();

  load_checkpoint(model->fingerprint());
  prepare_dp();
  make_metrics();
}

void SiteDaemon::Impl::load_checkpoint(const std::string& fingerprint) {
  store = std::make_unique<CheckpointStore>(
      config.checkpoint_dir_or_default(), static_cast<std::size_t>(config.checkpoint_keep),
      std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(config.checkpoint_interval)));
  auto loaded = store->load_newest(fingerprint);
  for (const auto& skipped : loaded.skipped) spdlog::warn("checkpoint passed over: {}", skipped.line());
  if (const auto fresh = fresh_start_message(store->dir(), loaded)) spdlog::warn("{}", *fresh);
  // Out of rotation, never deleted: the next write would replace or rotate them away.
  for (const auto& note : store->set_aside(loaded)) spdlog::warn("{}", note);
  if (loaded.checkpoint) {
    if (loaded.checkpoint->algorithm != algo.name()) {
      throw error::UserError("checkpoint " + loaded.file.string() + " was written by --algo " +
                             loaded.checkpoint->algorithm + ", this site runs " + std::string(algo.name()) +
                             " (use another --checkpoint-dir to start afresh)");
    }
    spdlog::info("resuming from {} (round {}, run rounds {}..{})", loaded.file.string(), loaded.checkpoint->step,
                 loaded.checkpoint->start_round, loaded.checkpoint->end_round);
    resume = std::move(loaded.checkpoint);
    // --epochs counts from the run's first round. A run in progress keeps the rounds its sites agreed on;
    // a finished one that --epochs now makes longer goes on to the new end, agreed again with the
    // sites that start with it (daemon/start_protocol.cc, docs/operations.md "Run length").
    const std::uint64_t planned_end = resume->start_round + data.total_steps;
    const bool finished = resume->step >= resume->end_round;
    if (finished && planned_end > resume->end_round) {
      trainer.added_steps = planned_end - resume->end_round;
      spdlog::info(
          "the checkpoint's run finished at round {} after {} steps; --epochs {} gives {}: continuing it by {}",
          resume->end_round, resume->end_round - resume->start_round, config.epochs, data.total_steps,
          format_count(trainer.added_steps, "step"));
    } else if (finished) {
      // Peers that start a longer run hear at once that this site's run has ended (serve_control).
      run_start = resume->start_round;
      run_end = resume->end_round;
      spdlog::warn(
          "the checkpoint's run finished at round {} after {} steps and --epochs {} gives no more ({}): "
          "nothing to train; raise --epochs to continue it, or use another --checkpoint-dir for a new run",
          resume->end_round, resume->end_round - resume->start_round, config.epochs,
          format_count(data.total_steps, "step"));
    } else if (planned_end != resume->end_round) {
      spdlog::warn(
          "--epochs {} gives {}, but the checkpoint's run in progress ends at round {} after {} steps, as its "
          "sites agreed: it keeps that end (restart every site with a longer --epochs once it has finished "
          "to continue it)",
          config.epochs, format_count(data.total_steps, "step"), resume->end_round,
          resume->end_round - resume->start_round);
    }
  }
}

void SiteDaemon::Impl::make_metrics() {
  if (metrics) return;
  metrics = std::make_unique<DaemonMetrics>(config.name, std::string(algo.name()));
  if (settings.max_send_bits_per_s > 0) metrics->max_send_bytes_per_second.set(settings.max_send_bits_per_s / 8);
  if (settings.metrics_address) {
    metrics_server = std::make_unique<MetricsServer>(metrics->registry(), *settings.metrics_address,
                                                     [this] { return render_page(); });
    spdlog::info("metrics on {}", metrics_server->url());
  }
}

void SiteDaemon::Impl::make_transport() {
  SiteTransportSpec spec{settings};
  // A view change acts a few rounds after it takes effect (dts: after D steps at the next window
  // start; dsync: D steps later); the next view must not come before that (peer/membership.h).
  spec.view_lead_rounds = std::max<std::uint64_t>(spec.view_lead_rounds, algo.view_change_reach(settings) + 2);
  // Views carry the federation's pace when this site's shape is chosen from it.
  spec.agree_pace = algo.shape_from_network(settings);
  // The built-in model, or the one the attached trainer declared.
  const std::string fingerprint = model ? model->fingerprint() : attached->model().fingerprint();
  const std::size_t parameters = model ? model->parameters().size() : attached->model().parameters;
  const std::size_t state = model ? model->state_count() : 0;
  spec.validation.model_fingerprint = fingerprint_hash(fingerprint);
  // Refused at join when they differ from a peer's (daemon/federation/federation_terms.h).
  spec.terms = model ? federation_terms(settings, *model, data.train) : federation_terms(settings, attached->model());
  spec.identity = identity;
  // No tensor a mixer sends is longer than four model-sized vectors (allreduce's re-average packs the
  // parameters with Adam's two moment vectors, then the normalization statistics); the cap also bounds
  // the frames libzmq will buffer.
  spec.limits.max_payload_elements = 4 * std::max<std::uint64_t>(parameters, 1) + state;
  // Operators (and the hostile-input test) match this against the fingerprints named in rejections.
  spdlog::info("model {}: {} parameters, wire fingerprint {:016x}", fingerprint, parameters,
               spec.validation.model_fingerprint);
  spdlog::info("algorithm: {}", describe_algorithm(settings));
  spdlog::info("deadlines: {}", describe_deadlines(config));
  if (config.round_timeout == kAutoDeadline) round_deadline = std::make_shared<peer::AdaptiveDeadline>(round_deadline_rule());
  if (config.heartbeat_timeout == kAutoDeadline)
    heartbeat_deadline = std::make_shared<peer::AdaptiveDeadline>(heartbeat_deadline_rule(config));
  spec.heartbeat_deadline = heartbeat_deadline;
  // The tensor lengths this algorithm's peers send (daemon/algorithms/).
  const auto wire = algo.wire_limits(settings);
  if (wire.pin_model_elements) spec.validation.model_elements = parameters;
  if (wire.pin_model_elements && wire.carries_state) spec.validation.state_elements = state;
  spec.validation.max_model_multiple = wire.max_model_multiple;
  transport = daemon_options.transport ? daemon_options.transport(spec) : make_zmq_transport(spec);
  if (!transport) throw error::InternalError("the transport factory of site '" + config.name + "' made no transport");
  if (resume) transport->resume_round(resume->step);
  // What `meridian roster` changes (daemon/site_roster.cc); the transport read the same file.
  if (!config.insecure) {
    control.roster_in_force = peer::Roster::load(config.roster);
    *secure_roster.lock() = control.roster_in_force;
    reachability.set_roster(names_of(*control.roster_in_force));
  }
  min_sites = resolve_min_sites(config, control.roster_in_force ? &*control.roster_in_force : nullptr);
  spdlog::info("{}", describe(min_sites));
  if (min_sites.warning) spdlog::warn("{}", *min_sites.warning);
  trail->write_endpoint(transport->endpoint());
}

void SiteDaemon::Impl::communicate() {
  gossip::Inbox inbox(*transport);
  gossip::RoundTimeouts timeouts;
  timeouts.round = round_timeout_bound(config);
  timeouts.adaptive = round_deadline;
  // A round abandoned for a member that died waits for the view without it: membership declares the
  // death within a heartbeat timeout and announces the view at once. Past twice that, nobody was found
  // dead (a lost message, a slow member) and the round is redone in its own view (gossip/redo_view.h).
  timeouts.view_change = heartbeat_timeout_bound(config) * 2;
  gossip::RobustOptions robust;
  robust.enabled = config.robust_aggregation;
  robust.clip_factor = config.robust_clip;
  robust.trim = static_cast<std::size_t>(config.robust_trim);
  gossip::AverageMixer averager(inbox, timeouts, gossip::RingOptions{}.max_piece, robust);
  // --secure-aggregation: every exact mean over the view, the re-averages included, is a masked one
  // (privacy/secure_mean_mixer.h), so nothing unmasked leaves the site; the pair secrets come from
  // this site's CurveZMQ key pair and the roster's public keys, and never leave it either.
  std::optional<privacy::PairKeys> pair_keys;
  std::optional<privacy::SecureMeanMixer> secure_mean;
  gossip::Mixer* exact = &averager;
  if (config.secure_aggregation) {
    if (!identity) throw error::InternalError("secure aggregation without this site's key pair");
    pair_keys.emplace(identity->keys, [this](const std::string& name) -> std::optional<std::string> {
      const auto roster = secure_roster.lock();
      const auto* entry = *roster ? (*roster)->by_name(name) : nullptr;
      if (entry == nullptr) return std::nullopt;
      return entry->public_key;
    });
    secure_mean.emplace(inbox, *pair_keys, secure_counters, timeouts, privacy::SecureMeanMixer::whole_view(),
                        privacy::kWholeViewDomain, privacy::SecureMeanMixer::Abandon::kRedo);
    exact = &*secure_mean;
    spdlog::info("secure aggregation: every mean over masked fixed-point shares, pair secrets from the CurveZMQ keys");
  }
  // The algorithm's own mixer (daemon/algorithms/), and whether it also takes the re-averages, which
  // otherwise go to the exact mixer.
  algorithms::MixerContext context{settings, inbox, timeouts, robust, *exact};
  if (pair_keys) {
    context.pair_keys = &*pair_keys;
    context.secure_counters = &secure_counters;
  }
  const auto mixers = algo.make_mixers(context);
  gossip::Mixer* algorithm = mixers.mix;
  // Fault injection (--byzantine-scale): this site's every contribution becomes garbage.
  std::optional<gossip::ByzantineMixer> byzantine_algorithm, byzantine_exact;
  if (config.byzantine_scale > 0) {
    spdlog::warn("--byzantine-scale {}: this site sends garbage to its peers (a fault-injection experiment)",
                 config.byzantine_scale);
    byzantine_algorithm.emplace(*algorithm, config.byzantine_scale, data_seed() ^ 0xb1ull);
    byzantine_exact.emplace(*exact, config.byzantine_scale, data_seed() ^ 0xb2ull);
    algorithm = &*byzantine_algorithm;
    exact = &*byzantine_exact;
  }
  gossip::MixServer server(channel, *algorithm, mixers.reaverage_with_mix ? *algorithm : *exact, round_deadline);
  *mix_server.lock() = &server;
  struct Unpublish {
    Impl& d;
    ~Unpublish() { *d.mix_server.lock() = nullptr; }
  } unpublish{*this};

  while (!trainer_done) {
    if (!algo.communicates()) {
      std::this_thread::sleep_for(milliseconds(20));
      continue;
    }
    server.serve_one(milliseconds(20));
    if (observe_rounds && observed_round == 0) {
      // Looks at mixer mail without taking it: everything stays stashed for the rounds that ask.
      std::uint64_t seen = 0;
      (void)inbox.take(
          [&](const peer::Message& m) {
            if (m.view_id >= observe_min_view) seen = std::max(seen, m.round + 1);
            return false;
          },
          Clock::now() + milliseconds(10));
      if (seen > 0) observed_round = seen;
    }
  }
  if (config.secure_aggregation) {
    const auto& c = secure_counters;
    spdlog::info(
        "secure aggregation: {} masked shares sent; refused {} malformed, {} stale, {} unmasked; {} values "
        "clipped, {} not finite",
        c.shares_sent.load(), c.refused_malformed.load(), c.refused_stale.load(), c.refused_unmasked.load(),
        c.clipped.load(), c.non_finite.load());
  }
}

SiteDaemon::SiteDaemon(const SiteConfig& config, SiteDaemonOptions options)
    : impl_(std::make_unique<Impl>(settings_of(config), std::move(options))) {}

SiteDaemon::~SiteDaemon() = default;

int SiteDaemon::run() {
  Impl& d = *impl_;
  if (d.daemon_options.handle_signals) {
    ShutdownSignals::install();
    ReloadSignal::install();
  }
  d.prepare();
  // Stopped while waiting for an attached trainer: nothing was joined, nothing to leave.
  if (d.attached_trainer() && !d.attached) return 0;
  d.make_transport();

  std::thread trainer([&d] {
    try {
      if (d.backend) d.backend->use_on_this_thread();
      d.train();
    } catch (...) {
      d.trainer_error = std::current_exception();
      d.channel.close();
    }
    d.trainer_done = true;
  });
  std::exception_ptr control_error;
  std::thread control([&d, &control_error] {
    try {
      d.serve_control();
    } catch (...) {
      control_error = std::current_exception();
      d.channel.fail(control_error);
      d.stop = true;
    }
  });
  std::exception_ptr comm_error;
  try {
    d.communicate();
  } catch (...) {
    comm_error = std::current_exception();
    // The trainer learns of it at its next wait, then finishes.
    d.channel.fail(comm_error);
    d.stop = true;
  }
  trainer.join();
  control.join();
  d.state = SiteState::kStopped;
  if (d.trainer_error) {
    d.transport->leave(milliseconds(1000));
    std::rethrow_exception(d.trainer_error);
  }
  if (comm_error) std::rethrow_exception(comm_error);
  if (control_error) std::rethrow_exception(control_error);
  spdlog::info("announcing leave");
  // Per-peer FIFO: once the leave is out, so is every chunk of the last round.
  d.transport->leave(milliseconds(3000));
  return d.finished_before ? kExitRunFinishedBefore : 0;
}

}  // namespace meridian::daemon
