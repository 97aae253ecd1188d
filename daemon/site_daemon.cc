#include "daemon/site_daemon.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <exception>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <zmq.hpp>

#include <spdlog/spdlog.h>

#include "daemon/checkpoint_store.h"
#include "daemon/compute_backend.h"
#include "daemon/control_server.h"
#include "daemon/cpu_usage.h"
#include "daemon/daemon_metrics.h"
#include "daemon/directory_lock.h"
#include "daemon/metrics_server.h"
#include "daemon/progress_line.h"
#include "daemon/run_plan.h"
#include "daemon/run_trail.h"
#include "daemon/shutdown_signals.h"
#include "daemon/site_data.h"
#include "daemon/trainer_algorithm.h"
#include "gossip/average_mixer.h"
#include "gossip/direct_mean_mixer.h"
#include "gossip/byzantine_mixer.h"
#include "gossip/group_mixer.h"
#include "gossip/inbox.h"
#include "gossip/mix_server.h"
#include "gossip/osgp_split.h"
#include "gossip/push_sum_mixer.h"
#include "models/data/batch_order.h"
#include "models/data/seeded_random.h"
#include "models/device.h"
#include "models/model_factory.h"
#include "models/thread_policy.h"
#include "peer/zmq_transport.h"

namespace meridian::daemon {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

milliseconds seconds_ms(double s) { return milliseconds(static_cast<long long>(std::llround(s * 1000.0))); }

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

std::string join_names(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

enum class SiteState { kJoining, kTraining, kLeaving, kStopped };
const char* to_string(SiteState s) {
  switch (s) {
    case SiteState::kJoining: return "joining";
    case SiteState::kTraining: return "training";
    case SiteState::kLeaving: return "leaving";
    case SiteState::kStopped: return "stopped";
  }
  return "?";
}

// What the trainer publishes for the control socket; guarded by Impl::live_mu.
struct LiveStatus {
  std::uint64_t step = 0;  // steps of this run done
  std::uint64_t epoch = 0;
  double train_loss = 0;
  std::optional<double> test_accuracy;
  std::uint64_t staleness = 0;
  double push_sum_weight = 1;
  double samples_per_second = 0;
  double bytes_per_second = 0;
  std::string last_checkpoint;
  std::optional<Clock::time_point> checkpoint_time;
};

}  // namespace

struct SiteDaemon::Impl final : ControlHandler {
  explicit Impl(SiteConfig c) : config(std::move(c)) {}

  SiteConfig config;
  Clock::time_point started = Clock::now();

  // Built by run() before the threads start.
  std::optional<DirectoryLock> run_lock, checkpoint_lock;
  SiteData data;
  std::shared_ptr<models::Backend> backend;
  std::unique_ptr<models::Model> model;
  std::unique_ptr<CheckpointStore> store;
  std::optional<Checkpoint> resume;
  std::unique_ptr<peer::ZmqTransport> transport;
  std::unique_ptr<DaemonMetrics> metrics;
  std::unique_ptr<MetricsServer> metrics_server;
  std::unique_ptr<RunTrail> trail;
  gossip::MixChannel channel;
  bool local = false;

  // Shared between the threads.
  std::atomic<SiteState> state{SiteState::kJoining};
  std::atomic<bool> stop{false};          // graceful stop asked (signal or `meridian leave`)
  std::atomic<bool> trainer_done{false};
  std::exception_ptr trainer_error;       // written by the trainer before trainer_done
  std::atomic<bool> observe_rounds{false};  // the trainer wants to know which round peers mix
  std::atomic<std::uint64_t> observed_round{0};  // round + 1 of the first mixer message seen; 0: none
  std::atomic<std::uint64_t> observe_min_view{0};  // only messages of this view or newer count
  std::mutex live_mu;
  LiveStatus live;
  PeerPlans plans;                          // heard by the control thread (daemon/run_plan.h)
  std::atomic<std::uint64_t> run_end{0};    // the run's end round once the trainer knows it; 0 before

  // --- ControlHandler (called on the communication thread) ---
  StatusReport status() override {
    StatusReport r;
    r.site = config.name;
    r.algorithm = config.algo;
    r.state = to_string(state.load());
    r.listen = transport->endpoint();
    const auto alive = transport->alive_members();
    const auto members = transport->members();
    r.peers_alive = static_cast<int>(alive.size());
    r.peers_known = static_cast<int>(std::max<std::size_t>(members.size(), 1));
    r.view_id = transport->latest_view().id;
    r.uptime_seconds = std::chrono::duration<double>(Clock::now() - started).count();
    std::lock_guard lock(live_mu);
    r.step = live.step;
    r.epoch = live.epoch;
    r.train_loss = live.train_loss;
    r.test_accuracy = live.test_accuracy;
    r.staleness = live.staleness;
    r.push_sum_weight = live.push_sum_weight;
    r.samples_per_second = live.samples_per_second;
    r.bytes_per_second = live.bytes_per_second;
    r.last_checkpoint = live.last_checkpoint;
    if (live.checkpoint_time) {
      r.checkpoint_age_seconds = std::chrono::duration<double>(Clock::now() - *live.checkpoint_time).count();
    }
    return r;
  }

  std::vector<PeerReport> peers() override {
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
      p.bytes_sent = m.bytes_out;
      p.bytes_received = m.bytes_in;
      out.push_back(std::move(p));
    }
    return out;
  }

  LeaveReport leave() override {
    LeaveReport r;
    r.accepted = !stop.exchange(true);
    r.message = r.accepted ? "leaving: finishing the step in flight, writing a checkpoint, then announcing the leave"
                           : "already leaving";
    if (r.accepted) spdlog::info("leave requested over the control socket");
    return r;
  }

  // --- set-up ---
  void prepare();
  void make_transport();

  // --- trainer thread ---
  void train();
  void warm_buffers();
  bool wait_for_view(bool resumed);  // false when stopped while waiting
  bool taken_back = false;  // set by wait_for_view: the view takes this site back after one without it
  std::uint64_t rejoin_round(const peer::View& view, std::uint64_t fallback);
  std::uint64_t agree_end_round(const peer::View& view);
  // Returns the error when the checkpoint could not be written (logged and counted already).
  std::optional<std::string> write_checkpoint(const TrainerAlgorithm& algorithm, const models::data::BatchOrder& order,
                                              std::uint64_t round, std::uint64_t start_round, std::uint64_t end_round);
  std::optional<double> evaluate(double& test_loss);
  double eval_seconds = 0;  // spent in evaluate() so far: progress records carry it

  // --- communication thread ---
  void communicate();
  // --- control thread: the control socket, signals, network metrics ---
  void serve_control();
  void refresh_network_metrics(std::map<std::string, std::pair<std::uint64_t, std::uint64_t>>& last_bytes,
                               std::array<std::uint64_t, peer::kRejectCauseCount>& last_rejected,
                               std::uint64_t& last_zap_denied);

  std::uint64_t data_seed() const {
    return models::data::SeededRandom::derive(config.seed, 0x6d657269ull + static_cast<std::uint64_t>(config.site_index));
  }
};

void SiteDaemon::Impl::prepare() {
  // --device first, so that a CUDA request without a device fails at once with the reason and a hint.
  // The model, its gradients and optimizer state live on the chosen backend; gossip/ sees host copies of
  // them (daemon/host_mirror.h).
  const auto device = models::resolve_device(models::parse_device(config.device), models::probe_cuda());
  spdlog::info("device: {}", device.explanation);
  std::string error;
  run_lock = DirectoryLock::acquire(config.run_dir, error);
  if (!run_lock) throw std::runtime_error(error);
  const std::filesystem::path checkpoint_dir = config.checkpoint_dir_or_default();
  if (!config.checkpoint_dir.empty()) {
    checkpoint_lock = DirectoryLock::acquire(checkpoint_dir, error);
    if (!checkpoint_lock) throw std::runtime_error(error);
  }
  trail = std::make_unique<RunTrail>(config.run_dir);

  data = load_site_data(config);
  spdlog::info("data: {} rows of {} in this site's part ({} of {}, {}), test {} rows; {} steps per epoch, {} steps",
               data.train.rows, config.dataset, config.site_index, config.site_count, config.partition, data.test.rows,
               data.steps_per_epoch, data.total_steps);

  const int threads = config.threads > 0 ? config.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  backend = make_backend(device.device);
  const models::Shape input = data.train.channels > 0
                                  ? models::Shape{data.train.channels, data.train.height, data.train.width}
                                  : models::Shape{data.train.dim, 1, 1};
  std::vector<std::size_t> widths(config.widths.begin(), config.widths.end());
  model = models::make_model(config.model, input, data.train.classes, widths, backend, config.seed);
  models::use_threads(*model, *backend, static_cast<std::size_t>(threads));

  store = std::make_unique<CheckpointStore>(checkpoint_dir, static_cast<std::size_t>(config.checkpoint_keep),
                                            std::chrono::duration_cast<Clock::duration>(
                                                std::chrono::duration<double>(config.checkpoint_interval)));
  auto loaded = store->load_newest(model->fingerprint());
  for (const auto& skipped : loaded.skipped) spdlog::warn("checkpoint passed over: {}", skipped);
  if (loaded.checkpoint) {
    if (loaded.checkpoint->algorithm != config.algo) {
      throw std::runtime_error("checkpoint " + loaded.file.string() + " was written by --algo " +
                               loaded.checkpoint->algorithm + ", this site runs " + config.algo +
                               " (use another --checkpoint-dir to start afresh)");
    }
    spdlog::info("resuming from {} (round {}, run rounds {}..{})", loaded.file.string(), loaded.checkpoint->step,
                 loaded.checkpoint->start_round, loaded.checkpoint->end_round);
    resume = std::move(loaded.checkpoint);
  }

  metrics = std::make_unique<DaemonMetrics>(config.name, config.algo);
  if (config.metrics_address != "off") {
    metrics_server = std::make_unique<MetricsServer>(metrics->registry(), config.metrics_address);
    spdlog::info("metrics on {}", metrics_server->url());
  }
}

void SiteDaemon::Impl::make_transport() {
  peer::ZmqTransportOptions o;
  o.name = config.name;
  o.listen = config.listen;
  o.advertise = config.advertise;
  o.region = config.region;
  o.wan = peer::parse_wan_spec(config.wan);
  o.wan_seed = config.seed;
  // A view change acts a few rounds after it takes effect (dts: after D steps at the next window
  // start; dsync: D steps later); the next view must not come before that (peer/membership.h).
  o.view_lead_rounds = std::max<std::uint64_t>(o.view_lead_rounds,
                                               static_cast<std::uint64_t>(config.delay + config.period) + 2);
  o.partitions = peer::parse_partition_schedule(config.wan_partition);
  if (const auto unix_seconds = partition_origin_unix_seconds(config.wan_partition_origin))
    o.partition_origin = std::chrono::system_clock::time_point(std::chrono::duration_cast<std::chrono::system_clock::duration>(
        std::chrono::duration<double>(*unix_seconds)));
  o.partition_clock_deferred = config.wan_partition_origin == "training";
  o.bootstrap = config.join;
  o.insecure = config.insecure;
  o.heartbeat_interval = heartbeat_milliseconds(config.heartbeat_interval);
  o.heartbeat_timeout = heartbeat_milliseconds(config.heartbeat_timeout);
  if (!config.insecure) {
    o.keys = peer::read_key_pair(config.key_dir);
    o.roster = peer::Roster::load(config.roster);
  }
  o.validation.model_fingerprint = fingerprint_hash(model->fingerprint());
  // No tensor a mixer sends is longer than four model-sized vectors (allreduce's re-average packs the
  // parameters with Adam's two moment vectors); the cap also bounds the frames libzmq will buffer.
  o.limits.max_payload_elements = 4 * std::max<std::uint64_t>(model->parameters().size(), 1);
  // Operators (and the hostile-input test) match this against the fingerprints named in rejections.
  spdlog::info("model {}: {} parameters, wire fingerprint {:016x}", model->fingerprint(), model->parameters().size(),
               o.validation.model_fingerprint);
  spdlog::info("algorithm: {}", describe_algorithm(config));
  // allreduce re-averages parameters and optimizer state as one tensor (trainer_algorithm.h), so only
  // the other algorithms can pin every tensor to the model's length.
  if (config.algo != "allreduce") o.validation.model_elements = model->parameters().size();
  // dts with momentum re-averages weights and momentum buffer as one tensor of two model-sized
  // vectors, and with P > 1 it averages the window displacement and window momentum that way too
  // (gossip/dts.h).
  if (config.algo == "dts" && config.optimizer == "momentum") o.validation.max_model_multiple = 2;
  // Push-sum mass starts at one per site and is only split, never created, so no honest share can
  // exceed the number of sites the roster lets in; twice that leaves room for mass a restarted site
  // brings back from its checkpoint. A larger weight would let one share outweigh the whole
  // federation. (Insecure mode has no roster, and anyone may join: the wide default stays.)
  if (o.roster) o.validation.max_weight = 2.0 * static_cast<double>(std::max<std::size_t>(o.roster->entries().size(), 1));
  transport = std::make_unique<peer::ZmqTransport>(std::move(o));
  if (resume) transport->resume_round(resume->step);
  trail->write_endpoint(transport->endpoint());
  spdlog::info("site {} listening on {} ({})", config.name, transport->endpoint(),
               config.insecure ? "INSECURE: no encryption, no authentication" : "CurveZMQ, roster " + config.roster);
}

bool SiteDaemon::Impl::wait_for_view(bool resumed) {
  const auto need = static_cast<std::size_t>(config.min_sites > 0 ? config.min_sites : config.site_count);
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
  const auto alone_grace = 2 * heartbeat_milliseconds(config.heartbeat_timeout) + settle;
  // Both views come after the checkpoint's round: the previous incarnation was alive there, so a view
  // that left it out before (when the federation formed, say) does not count.
  const std::uint64_t checkpoint_round = resumed && resume ? resume->step : 0;
  auto back_in = [&](const peer::View& view) {
    if (view.effective_round <= checkpoint_round) return false;
    for (peer::View v = view; v.id > 0 && v.effective_round > checkpoint_round + 1;) {
      peer::View older = transport->view_for(v.effective_round - 1);
      if (older.id >= v.id || older.id == 0 || older.effective_round <= checkpoint_round) return false;
      if (!older.rank_of(config.name)) return true;
      v = std::move(older);
    }
    return false;
  };
  while (true) {
    if (stop) return false;
    const auto view = transport->latest_view();
    const bool enough = view.rank_of(config.name) && view.size() >= need &&
                        (!resumed || back_in(view) || Clock::now() - waiting_since >= alone_grace);
    if (enough) {
      if (!candidate || *candidate != view) {
        candidate = view;
        candidate_since = Clock::now();
      } else if (Clock::now() - candidate_since >= settle && resumed && back_in(view)) {
        // The view that takes this site back was announced for it. It settles like any other: this
        // site may have proposed it from the stale round it knew while its peers proposed the same id
        // from theirs, and the greater proposal replaces the other only until this site runs in it.
        // Its peers wait at its first round for it (within --round-timeout).
        spdlog::info("view {} from round {}: {} ({} sites), rejoining", view.id, view.effective_round,
                     join_names(view.members), view.size());
        taken_back = true;
        return true;
      } else if (Clock::now() - candidate_since >= settle) {
        spdlog::info("view {} from round {}: {} ({} sites){}", view.id, view.effective_round, join_names(view.members),
                     view.size(), resumed ? ", rejoining" : "");
        return true;
      }
    } else {
      candidate.reset();
    }
    if (Clock::now() > deadline) {
      throw std::runtime_error("gave up after --join-timeout " + std::to_string(config.join_timeout) + " s: " +
                               std::to_string(transport->alive_members().size()) + " of " + std::to_string(need) +
                               " sites reachable (" + join_names(transport->alive_members()) +
                               "); check --join addresses, the roster and that the other sites are running");
    }
    if (Clock::now() >= next_note) {
      spdlog::info("waiting for {} sites in the view (have {}: {}); --join {}", need, view.size(),
                   join_names(view.members), config.join.empty() ? "(none: others must join this site)" : join_names(config.join));
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
  const auto deadline = Clock::now() + seconds_ms(config.round_timeout) + std::chrono::seconds(2);
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

std::uint64_t SiteDaemon::Impl::agree_end_round(const peer::View& view) {
  // Every member of the starting view says how many steps its data gives it; the run ends after the
  // smallest. A member that already trains (this site joins a running federation) answers with the
  // run's end round, which this site then takes. Plans are re-sent each second in case one was sent
  // before a peer's connection was up.
  const RunPlan own{data.total_steps, 0};
  const auto deadline = Clock::now() + seconds_ms(config.round_timeout) + std::chrono::seconds(10);
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
        return std::max(it->second.end_round, view.effective_round);
      }
      steps = std::min(steps, it->second.steps);
    }
    const bool late = Clock::now() >= deadline;
    if (missing == 0 || late) {
      if (late) spdlog::warn("{} of {} sites sent no plan in time: the run length counts only the others", missing, view.size());
      if (steps < own.steps)
        spdlog::info("the run ends after {} steps, as the smallest site's data gives ({} here)", steps, own.steps);
      return view.effective_round + steps;
    }
    std::this_thread::sleep_for(milliseconds(20));
  }
  return view.effective_round + own.steps;
}

std::optional<double> SiteDaemon::Impl::evaluate(double& test_loss) {
  if (data.test.rows == 0) return std::nullopt;
  const auto started = Clock::now();
  const auto e = model->evaluate(data.test);
  eval_seconds += std::chrono::duration<double>(Clock::now() - started).count();
  test_loss = e.loss;
  return e.accuracy;
}

std::optional<std::string> SiteDaemon::Impl::write_checkpoint(const TrainerAlgorithm& algorithm,
                                                             const models::data::BatchOrder& order, std::uint64_t round,
                                                             std::uint64_t start_round, std::uint64_t end_round) {
  const std::uint64_t seed = data_seed();
  std::array<std::uint8_t, 8> rng{};
  for (int i = 0; i < 8; ++i) rng[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(seed >> (8 * i));
  CheckpointView v;
  v.parameters = algorithm.checkpoint_parameters();
  v.optimizer_state = algorithm.checkpoint_state();
  v.push_sum_weight = algorithm.push_sum_weight();
  v.push_sum_weight_average = algorithm.push_sum_weight_average();
  v.step = round;
  v.epoch = order.position().epoch;
  v.data_position = order.position().offset;
  v.rng_state = rng;
  v.model_fingerprint = model->fingerprint();
  v.algorithm = config.algo;
  v.start_round = start_round;
  v.end_round = end_round;
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

void SiteDaemon::Impl::warm_buffers() {
  // The first touch of a fresh model-sized buffer faults in every page of it: on the 2-core VM of
  // docs/results.md about 9.5 ms of CPU per 2 MB (against 0.1 ms to write it again), as much as a
  // whole step's compute there. A run keeps a handful of such buffers in flight (shares on the
  // emulated links and in the inbox, snapshots and mix results in the channel) and faulted each in
  // during its first steps. They are made now, while the site waits for its peers: the transport's
  // pool and the channel's spares hand them out later (heap_retention.h keeps what is freed).
  const std::size_t n = model->parameter_count();
  // dts windows carry the weights' and the momentum's displacement; the other mixes the parameters.
  // dts' direct exchange sends and receives whole windows, so its shares on the links are as long.
  const std::size_t channel_elements = config.algo == "dts" ? 2 * n : n;
  const std::size_t share_elements = config.algo == "dts" && config.exchange == "direct" ? channel_elements : n;
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

void SiteDaemon::Impl::train() {
  const bool resumed = resume.has_value();
  std::uint64_t start_round = 0, end_round = data.total_steps, k = 0;
  if (local) {
    if (resumed) {
      start_round = resume->start_round;
      end_round = resume->end_round;
      k = resume->step;
    }
  } else {
    warm_buffers();
    if (!wait_for_view(resumed)) return;
    const auto view = transport->latest_view();
    if (resumed) {
      start_round = resume->start_round;
      end_round = resume->end_round;
      const auto from = std::max<std::uint64_t>(view.effective_round, resume->step);
      // A view that takes this site back after one without it starts exactly where the peers first
      // need it: they ran the rounds before without it. sgp's peers do not wait for anyone, so there
      // the site joins at the round they are mixing if that is later.
      k = !taken_back ? rejoin_round(view, from) : config.algo == "sgp" ? std::max(from, rejoin_round(view, from)) : from;
      spdlog::info("rejoining at round {} (checkpoint at round {})", k, resume->step);
    } else {
      start_round = view.effective_round;
      end_round = agree_end_round(view);
      k = start_round;
    }
    run_end = end_round;
  }
  if (stop) return;
  state = SiteState::kTraining;
  if (transport) transport->start_partition_clock();

  models::data::BatchPosition position;
  if (resumed) position = {resume->epoch, static_cast<std::size_t>(std::min<std::uint64_t>(resume->data_position, data.train.rows))};
  models::data::BatchOrder order(data.train.rows, data_seed(), position);
  auto algorithm = make_trainer_algorithm(config, *model, backend, channel,
                                          schedule_of(config, data.steps_per_epoch, end_round - start_round));
  if (resumed) algorithm->restore(*resume);
  resume.reset();

  const std::size_t batch = static_cast<std::size_t>(config.batch);
  const std::size_t dim = data.train.dim;
  std::vector<float> x(batch * dim);          // (batch, dim), reused every step
  std::vector<std::int32_t> labels(batch);    // (batch)
  const std::uint64_t eval_every = config.eval_every > 0 ? static_cast<std::uint64_t>(config.eval_every) : data.steps_per_epoch;
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
  for (; k < end_round && !stop; ++k) {
    if (transport) {
      transport->set_round(k);
      // Views change at the round they announced; the log says when this site switched.
      const auto view = transport->view_for(k);
      if (view.id != view_in_force && view.id != 0) {
        if (view_in_force != 0)
          spdlog::info("round {}: view {} in force: {} ({} sites){}", k, view.id, join_names(view.members), view.size(),
                       view.rank_of(config.name) ? "" : "; not in it: training alone until a view takes this site back");
        view_in_force = view.id;
      }
    }
    const auto step_start = Clock::now();
    const auto waited_before = channel.trainer_waited();
    const auto rows = order.next(batch);
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const float* src = data.train.row(rows[i]);
      std::copy(src, src + dim, x.data() + i * dim);
      labels[i] = data.train.labels[rows[i]];
    }
    const float loss = model->forward_backward(x.data(), labels.data(), rows.size());
    if (!std::isfinite(loss)) {
      throw std::runtime_error("training diverged at round " + std::to_string(k) + " (loss " + std::to_string(loss) +
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
    if (store->due()) (void)write_checkpoint(*algorithm, order, k + 1, start_round, end_round);

    const double epoch = static_cast<double>(steps_done) / static_cast<double>(data.steps_per_epoch);
    {
      std::lock_guard lock(live_mu);
      live.step = steps_done;
    }
    metrics->step.set(static_cast<double>(steps_done));
    metrics->epoch.set(epoch);
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
      p.step = steps_done;
      p.total_steps = steps_total;
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
        live.step = steps_done;
        live.epoch = static_cast<std::uint64_t>(epoch);
        live.train_loss = loss_avg;
        live.test_accuracy = accuracy;
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
  const auto final_checkpoint_error = write_checkpoint(*algorithm, order, k, start_round, end_round);
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
    throw std::runtime_error("the final checkpoint could not be written: " + *final_checkpoint_error +
                             "; the newest valid checkpoint is " +
                             (final_checkpoint.empty() ? std::string("none (none was ever written)") : final_checkpoint));
  };
  const auto [sent, received] = network_bytes();
  RunResult r;
  r.site = config.name;
  r.algo = config.algo;
  r.steps = steps_done;
  r.epochs = static_cast<double>(steps_done) / static_cast<double>(data.steps_per_epoch);
  r.train_seconds = train_seconds;
  r.seconds_per_step = steps_done > 0 ? train_seconds / static_cast<double>(steps_done) : 0;
  r.finish_seconds = finish_seconds;
  r.loop_wait_seconds = std::chrono::duration<double>(loop_waited).count();
  r.loop_trainer_cpu_seconds = loop_cpu.thread_seconds;
  r.loop_process_cpu_seconds = loop_cpu.process_seconds;
  r.loop_minor_faults = loop_cpu.minor_faults;
  r.train_start = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count() -
                  train_seconds;
  r.test_accuracy = accuracy;
  r.push_sum_weight = algorithm->push_sum_weight();
  r.bytes_sent = sent;
  r.bytes_received = received;
  r.rounds_abandoned = algorithm->rounds_abandoned();
  r.final_checkpoint = final_checkpoint;
  r.completed = completed;
  trail->write_result(r);
  if (!completed) {
    spdlog::info("stopped at round {} ({} of {} steps); checkpoint {}; result {}", k, steps_done, steps_total,
                 final_checkpoint, trail->result_file().string());
    fail_if_final_checkpoint_missing();
    return;
  }
  spdlog::info("finished {} steps in {:.1f} s; test accuracy {}; result {}", steps_done, train_seconds,
               accuracy ? std::to_string(*accuracy) : std::string("n/a"), trail->result_file().string());
  std::printf("test accuracy %s (%s, %llu steps, %.1f s)\n", accuracy ? std::to_string(*accuracy).c_str() : "n/a",
              config.algo.c_str(), static_cast<unsigned long long>(steps_done), train_seconds);
  std::fflush(stdout);
  fail_if_final_checkpoint_missing();
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
}

void SiteDaemon::Impl::communicate() {
  gossip::Inbox inbox(*transport);
  gossip::RoundTimeouts timeouts;
  timeouts.round = seconds_ms(config.round_timeout);
  timeouts.view_change = std::max(milliseconds(60000), seconds_ms(config.round_timeout) * 2);
  // validate_site_config has accepted the text, and which algorithms take which compression.
  const auto compression = gossip::parse_compression(config.compression).value_or(gossip::CompressionSpec{});
  const bool compressed = compression.encoding != gossip::Encoding::kDense;
  gossip::RobustOptions robust;
  robust.enabled = config.robust_aggregation;
  robust.clip_factor = config.robust_clip;
  robust.trim = static_cast<std::size_t>(config.robust_trim);
  gossip::AverageMixer averager(inbox, timeouts, gossip::RingOptions{}.max_piece, robust);
  gossip::PushSumMixer push_sum(inbox, static_cast<std::size_t>(config.out_peers), timeouts, robust,
                                config.algo == "sgp" ? compression : gossip::CompressionSpec{},
                                gossip::osgp_split(static_cast<std::uint32_t>(config.tau)).mixer_staleness);
  gossip::GroupMixer groups(inbox, timeouts, robust);
  std::optional<gossip::DirectMeanMixer> direct_mean;
  if (config.algo == "dts" && (compressed || config.exchange == "direct"))
    direct_mean.emplace(inbox, averager, compression, timeouts);
  gossip::Mixer* algorithm = config.algo == "sgp"     ? static_cast<gossip::Mixer*>(&push_sum)
                             : config.algo == "dsync" ? static_cast<gossip::Mixer*>(&groups)
                             : direct_mean            ? static_cast<gossip::Mixer*>(&*direct_mean)
                                                      : static_cast<gossip::Mixer*>(&averager);
  gossip::Mixer* exact = &averager;
  // The mixer the server gives re-averages to: the ring, except for dts' dense direct exchange, which
  // re-averages in its single crossing (the ring's 2(n - 1) crossings stall every trainer 6x longer
  // with 4 sites).
  const bool direct_reaverage = direct_mean.has_value() && !compressed;
  // Fault injection (--byzantine-scale): this site's every contribution becomes garbage.
  std::optional<gossip::ByzantineMixer> byzantine_algorithm, byzantine_exact;
  if (config.byzantine_scale > 0) {
    spdlog::warn("--byzantine-scale {}: this site sends garbage to its peers (a fault-injection experiment)",
                 config.byzantine_scale);
    byzantine_algorithm.emplace(*algorithm, config.byzantine_scale, data_seed() ^ 0xb1ull);
    byzantine_exact.emplace(averager, config.byzantine_scale, data_seed() ^ 0xb2ull);
    algorithm = &*byzantine_algorithm;
    exact = &*byzantine_exact;
  }
  gossip::MixServer server(channel, *algorithm, direct_reaverage ? *algorithm : *exact);

  while (!trainer_done) {
    if (local) {
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
}

void SiteDaemon::Impl::serve_control() {
  // Its own thread, so that status, peers and leave are answered while the communication thread waits
  // inside a mix for a slow or dead peer (up to a round deadline plus a view change).
  zmq::context_t context(1);
  ControlServer control(context, config.control_socket_or_default(), *this);
  spdlog::info("control socket {}", control.path());
  std::map<std::string, std::pair<std::uint64_t, std::uint64_t>> last_bytes;
  std::array<std::uint64_t, peer::kRejectCauseCount> last_rejected{};
  std::uint64_t last_zap_denied = 0;
  auto next_refresh = Clock::now();
  while (!trainer_done) {
    zmq::pollitem_t item{control.socket().handle(), 0, ZMQ_POLLIN, 0};
    zmq::poll(&item, 1, milliseconds(20));
    if (item.revents & ZMQ_POLLIN) control.serve_pending();
    while (auto msg = transport->receive_control(milliseconds(0))) {
      // A peer's plan (daemon/run_plan.h); one that has not started yet hears the run's end from a
      // site that trains.
      const auto plan = plans.note(*msg);
      if (!plan) {
        spdlog::warn("ignored a control message from '{}' that is not a run plan", msg->from);
        continue;
      }
      if (plan->end_round == 0 && run_end != 0) transport->send(msg->from, plan_message({data.total_steps, run_end}));
    }
    if (ShutdownSignals::requested() && !stop.exchange(true)) {
      spdlog::info("stop requested: finishing the step in flight, then checkpoint and leave (again to exit at once)");
    }
    if (Clock::now() >= next_refresh) {
      refresh_network_metrics(last_bytes, last_rejected, last_zap_denied);
      next_refresh = Clock::now() + milliseconds(500);
    }
  }
}

SiteDaemon::SiteDaemon(SiteConfig config) : impl_(std::make_unique<Impl>(std::move(config))) {
  validate_site_config(impl_->config);
  if (const auto problems = algorithm_config_problems(impl_->config); !problems.empty()) {
    std::string text = "invalid site configuration:";
    for (const auto& p : problems) text += "\n  " + p;
    throw AlgorithmConfigError(text);
  }
  impl_->local = impl_->config.algo == "local";
}

SiteDaemon::~SiteDaemon() = default;

int SiteDaemon::run() {
  Impl& d = *impl_;
  ShutdownSignals::install();
  d.prepare();
  d.make_transport();

  std::thread trainer([&d] {
    try {
      d.backend->use_on_this_thread();
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
  return 0;
}

}  // namespace meridian::daemon
