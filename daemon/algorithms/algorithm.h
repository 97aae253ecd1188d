// What one training algorithm is to the rest of Meridian: everything that makes sgp sgp (or dts dts)
// lives in that algorithm's own file pair under daemon/algorithms/, and the daemon, `meridian start`,
// `init` and `simulate` ask it through this interface instead of switching on its name.
//
// An algorithm owns:
//   - its configuration: the options only it reads, declared in its own files (options(),
//     daemon/algorithms/algorithm_option.h), defaults for the knobs the user left out (apply_defaults),
//     the checks only it makes (check) and its line in the start-up log (describe_knobs);
//   - its trainer side (make_trainer, daemon/trainer_algorithm.h) and the mixers its rounds need on the
//     communication thread (make_mixers);
//   - what it puts on the wire (wire_limits: the tensor lengths a receiver accepts) and the buffers a
//     site warms for it (buffer_sizes);
//   - its checkpoint sections: the trainer's checkpoint_*() and restore() say which it writes and reads;
//   - how it exchanges with an attached trainer (attached_hook, make_attached_trainer;
//     daemon/attached/attached_trainer.h), on the same gossip/ rule as its built-in trainer side.
// daemon/algorithms/registry.cc lists the algorithms, one line each; docs/design.md ("What an algorithm
// implements") and docs/algorithms.md ("Adding an algorithm") say what a new one implements.
//
// Thread-safety: an Algorithm is an immutable description, shared by every thread and every site of
// the process; what it makes (trainer, mixers) belongs to the thread that asked for it.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "daemon/algorithms/algorithm_option.h"
#include "daemon/attached/attached_trainer.h"
#include "daemon/site_config.h"
#include "daemon/trainer_algorithm.h"
#include "gossip/inbox.h"
#include "gossip/mix_channel.h"
#include "gossip/mixer.h"
#include "gossip/robust_options.h"
#include "gossip/round.h"
#include "gossip/tensor_codec.h"
#include "models/lr_schedule.h"
#include "models/model.h"
#include "privacy/pair_keys.h"
#include "privacy/secure_aggregation_counters.h"

namespace meridian::daemon::algorithms {

// Whether the user gave an option (on the command line, in the config file, or as a simulate knob),
// by its long name without "--" (e.g. "delay").
using OptionGiven = std::function<bool(std::string_view option)>;

// What a receiver accepts from this algorithm's peers (peer/message_validator.h).
struct WireLimits {
  bool pin_model_elements = true;        // every tensor is a multiple of the model's length
  std::uint32_t max_model_multiple = 1;  // ... of at most this many model lengths
  bool carries_state = false;            // ... possibly followed by the model's state (models::Model::state())
};

// The model-sized buffers a site makes before training (SiteDaemon's buffer warming), in floats.
struct BufferSizes {
  std::size_t channel_elements = 0;  // a snapshot or mix result in the MixChannel
  std::size_t share_elements = 0;    // a share on the links and in the inbox
};

// What the communication thread hands an algorithm to build its mixers.
struct MixerContext {
  const SiteSettings& settings;
  gossip::Inbox& inbox;
  gossip::RoundTimeouts timeouts;
  gossip::RobustOptions robust;
  gossip::Mixer& exact;  // the ring all-reduce over the view (gossip/average_mixer.h), which always exists;
                         // with secure aggregation, the masked mean over the view instead
  // With --secure-aggregation: this site's pair secrets and its counters, for an algorithm that makes
  // masked mixers of its own (dsync's groups); null otherwise.
  privacy::PairKeys* pair_keys = nullptr;
  privacy::SecureAggregationCounters* secure_counters = nullptr;
};

// The mixer an algorithm's rounds run on. `owned` holds it unless it is the context's exact mixer.
struct MixerSet {
  std::unique_ptr<gossip::Mixer> owned;
  gossip::Mixer* mix = nullptr;     // kMix rounds
  bool reaverage_with_mix = false;  // kReaverage rounds too (else: the exact mixer)
};

// What the trainer thread hands an algorithm to build its trainer side. All borrowed; they outlive the
// trainer.
struct TrainerContext {
  const SiteSettings& settings;
  models::Model& model;
  std::shared_ptr<models::Backend> backend;  // the model's backend
  gossip::MixChannel& channel;               // unused by an algorithm that does not communicate
  models::ScheduleConfig schedule;
};

class Algorithm {
 public:
  virtual ~Algorithm() = default;

  // Its --algo name, unique among the registered algorithms (daemon/algorithms/registry.h): what the
  // configuration, the checkpoints and the logs know it by.
  virtual std::string_view name() const = 0;

  // --- configuration ---
  // The options only this algorithm reads, declared in its own .cc (each a constant with a stable
  // address). The configuration makes their flags, config-file keys, simulate knobs, help texts and
  // checks from these declarations; the algorithm reads their values with
  // settings.options.algorithm_options.whole(option) or .real(option). The default declares none.
  virtual std::span<const AlgorithmOption* const> options() const { return {}; }
  // Whether `option` is one of options().
  bool declares(const AlgorithmOption& option) const;
  // On the configuration text, before it is validated: fills in the knobs this algorithm picks when
  // the user gave none (dts: its (D, P) shape). The default changes nothing.
  virtual void apply_defaults(SiteConfig& config, const OptionGiven& given) const;
  // Appends every problem that keeps `settings` from running this algorithm, each "--option: problem
  // (hint)". `settings` holds the parsed options; one that did not parse holds its default there (its
  // own problem is reported already).
  virtual void check(const SiteSettings& settings, std::vector<std::string>& problems) const = 0;
  // Whether it reads --OPTION, for the shared options only some algorithms read (kAlgorithmKnobs): the
  // configuration refuses a value of "compensation" or "exchange" other than the default for an
  // algorithm that does not read it, naming those that do, and `meridian init` writes the knobs it
  // does not read as comments (for a declared option, declares() decides the same). The default
  // reads none.
  virtual bool reads(std::string_view option) const;
  // Whether it can send its tensors with `encoding` (--compression); the default only dense ones.
  virtual bool accepts(gossip::Encoding encoding) const { return encoding == gossip::Encoding::kDense; }
  // The knobs it reads, for the start-up log after its name ("D = 2, P = 16, ..."); "" for none.
  virtual std::string describe_knobs(const SiteSettings& settings) const = 0;

  // --- communication ---
  // False for an algorithm that never mixes (local): no view to wait for, no mixer is served.
  virtual bool communicates() const { return true; }
  // Whether the peers wait at the round a site that left comes back at (the ring-based algorithms);
  // false when they go on without it (push-sum), so a returning site joins at the round they mix.
  virtual bool peers_wait_for_rejoin() const { return true; }
  virtual WireLimits wire_limits(const SiteSettings& settings) const = 0;
  virtual BufferSizes buffer_sizes(const SiteSettings& settings, std::size_t parameters) const = 0;
  // The rounds a view change takes to act (dts: D steps and the next window start; diloco: the overlap
  // and the next sync): the next view must not come sooner (peer/membership.h, view_lead_rounds). With
  // a shape chosen from the network (daemon/algorithms/auto_shape.h), the largest it may choose. The
  // default: --delay + --period, with --delay auto counted as --period.
  virtual std::uint64_t view_change_reach(const SiteSettings& settings) const;
  // Whether `settings` have it choose its shape from the network (--delay auto, --tau auto): the views
  // then carry the federation's pace (peer/pace.h) and its trainer follows it (adopt_view). The
  // default: never.
  virtual bool shape_from_network(const SiteSettings& settings) const {
    (void)settings;
    return false;
  }
  // On the communication thread. The default: every round on the exact mixer.
  virtual MixerSet make_mixers(const MixerContext& context) const;
  // Whether every round takes an exact mean over a group (a sum of one share per member), which
  // secure aggregation can mask (--secure-aggregation, privacy/secure_mean_mixer.h); false for push-sum
  // and for an algorithm that does not communicate.
  virtual bool takes_exact_means() const { return false; }

  // --- training ---
  // Its trainer side, for settings check() accepted.
  virtual std::unique_ptr<TrainerAlgorithm> make_trainer(const TrainerContext& context) const = 0;

  // --- an attached trainer (`--trainer attached`, daemon/attached/attached_trainer.h) ---
  // Where the exchange with a trainer process sits in its step: kGradients before the trainer's
  // optimizer step, kParameters after it, kUpdate in its place (the algorithm is its own optimizer, as
  // dts). nullopt: the algorithm does not run attached (the configuration refuses it, naming those
  // that do). The default: nullopt.
  virtual std::optional<TrainerHook> attached_hook() const { return std::nullopt; }
  // Its trainer side for an attached trainer, on the shared segment, running the same gossip/ rule as
  // make_trainer's; for an algorithm whose attached_hook() is set (the default throws
  // error::InternalError).
  virtual std::unique_ptr<AttachedTrainer> make_attached_trainer(const AttachedContext& context) const;
};

// The shared options only some algorithms read, each a field of SiteConfig named by its long option
// without "--": what Algorithm::reads() answers for. Every other shared option is read alike by every
// algorithm (or by every one that communicates).
inline constexpr std::array<std::string_view, 9> kAlgorithmKnobs{
    "delay", "period", "out-peers", "tau", "grid", "reaverage-every", "compensation", "compression", "exchange"};

// --delay auto: dts' D and P follow the view's pace (daemon/algorithms/auto_shape.h; diloco's --overlap
// auto is its own option).
bool delay_is_auto(const SiteSettings& settings);

// For the algorithms whose rounds take an exact mean (dts, diloco): the largest view whose mean travels
// in one direct crossing rather than over the ring all-reduce. 0 with --exchange ring (never); every
// view with --exchange direct or any compression (the ring carries no compressed values); with
// --exchange auto, kAutoDirectMaxSites. A round's view is the one announced for its step, the same on
// every site, so every site takes the same path.
std::size_t direct_exchange_max_sites(const SiteSettings& settings);
// --exchange auto's bound: up to 8 sites one crossing is worth n − 1 copies per site (the ring sends
// 2(n − 1)/n, 4x less at 8 sites, for 14 crossings in a row instead of one); above it each site's
// volume keeps growing with n while the ring's stays under two models. A judgement, not a measured
// crossover.
inline constexpr std::size_t kAutoDirectMaxSites = 8;
// The exchange as the start-up log and the federation terms name it: "ring", "direct" or "auto (direct
// up to 8 sites, ring above)".
std::string describe_exchange(const SiteSettings& settings);

// Their mixers: the exact ring, or a DirectMeanMixer when some views exchange directly (it hands larger
// views to the ring); with secure aggregation, the context's exact mixer, which is then the masked mean. The direct exchange re-averages in its single crossing too, dense whatever the
// wire (the ring's 2(n − 1) crossings stall every trainer about 6x longer with 4 sites).
MixerSet exact_mean_mixers(const MixerContext& context);

// For the push-sum algorithms: a PushSumMixer over the view's exponential graph with K = --out-peers,
// --compression, the staleness bound τ and the graph period P (gossip/push_sum_mixer.h) for kMix rounds.
MixerSet push_sum_mixers(const MixerContext& context, std::uint64_t staleness, std::uint64_t graph_period);

}  // namespace meridian::daemon::algorithms
