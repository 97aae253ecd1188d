// Everything one site needs to run, from flags and a config file (TOML, read with CLI11's config
// parser): identity and network, data and partition, model, optimizer and schedule, algorithm and its
// knobs, WAN emulation, checkpoints, metrics, control socket, device.
//
// Two forms, and one boundary between them:
//   - SiteConfig, the options as given: every field is a flag of `meridian start` and a key of the
//     config file with the same name (--checkpoint-dir / checkpoint-dir = "..."), and so is every option
//     an algorithm declares for itself (daemon/algorithms/algorithm_option.h; its value is in
//     algorithm_options); a flag given on the command line wins over the file. `meridian init` writes
//     a commented file (render_site_config) that reads back to the same values. Its texts are not yet
//     checked.
//   - SiteSettings, the validated, typed configuration: parse_site_settings() reads every option
//     grammar (algorithm, optimizer, schedule, compression, grid, WAN model, partition schedule,
//     device, ...) once, into enums and small value types, and lists every problem at once. Past it
//     nothing compares option names: the daemon and the algorithms (daemon/algorithms/) read types.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "daemon/algorithms/algorithm_option.h"
#include "error/error.h"
#include "gossip/dts.h"
#include "gossip/group_grid.h"
#include "gossip/tensor_codec.h"
#include "models/data/image_augmentation.h"
#include "models/data/normalization_spec.h"
#include "models/data/npy_reader.h"
#include "models/data/partition.h"
#include "models/data/tabular_schema.h"
#include "models/device.h"
#include "models/optimizer.h"
#include "peer/partition_schedule.h"
#include "peer/wan_model.h"

namespace CLI {
class App;
class Option;
}  // namespace CLI

namespace meridian::daemon {

namespace algorithms {
class Algorithm;  // daemon/algorithms/algorithm.h
}  // namespace algorithms

// --delay auto and --tau auto in SiteConfig's whole-number fields: the shape is chosen from the
// network (daemon/algorithms/auto_shape.h).
inline constexpr int kAutoShape = -1;
// "auto" as kAutoShape, a whole number >= 0 as itself; nullopt for anything else.
std::optional<int> parse_shape_knob(std::string_view text);
// "auto" for kAutoShape, else the number.
std::string shape_knob_text(int value);
// Binds --NAME to `field`, taking a whole number >= 0 or auto (the start flags --delay and --tau, and
// simulate's shared ones).
CLI::Option* bind_shape_option(CLI::App& app, const std::string& name, int& field, const std::string& help);

// --round-timeout auto and --heartbeat-timeout auto in SiteConfig's fields: the deadline follows
// measurements (daemon/federation/deadlines.h).
inline constexpr double kAutoDeadline = -1;
// Binds --NAME to `field`, taking a number of seconds or auto (the start flags --round-timeout and
// --heartbeat-timeout, and simulate's). The number's range is checked later, with the other options.
CLI::Option* bind_deadline_option(CLI::App& app, const std::string& name, double& field, const std::string& help);

struct SiteConfig {
  // Identity and network
  std::string name;                   // unique in the federation; [A-Za-z0-9._-], at most 64 characters
  std::string key_dir = "keys";       // this site's CurveZMQ key pair (meridian keygen)
  std::string roster = "roster.txt";  // the sites allowed in the federation (peer/roster.h: plain text)
  std::string listen = "tcp://0.0.0.0:7400";
  std::string advertise;                 // address peers connect to; "" = the bound address (needed
                                         // when listening on 0.0.0.0)
  std::vector<std::string> join;         // bootstrap peers, tcp://HOST:PORT
  bool insecure = false;                 // no CurveZMQ: local experiments only
  double heartbeat_interval = 0.5;       // seconds between the heartbeats sent to every live member
  double heartbeat_timeout = kAutoDeadline;  // seconds of silence after which a member is declared dead; auto
  std::string run_dir = "meridian-run";  // default home of checkpoints and the control socket
  std::string max_send_rate;             // "" (no cap) | a rate such as 50mbit or 10MB/s: all this site sends

  // Data
  std::string train;                      // data as a path, format from the path (models/data/data_source.h);
                                          // "" = --dataset
  std::string test;                       // with --train: the test data, optional
  std::string classes;                    // with --train: the class list a,b,c ("" = from the data)
  std::string layout;                     // with --train: nchw | nhwc for 4-D NumPy features ("" = unstated)
  std::string augment = "none";           // none | crop:N | flip | crop:N,flip (images only)
  std::string normalize = "auto";         // auto | federation | none (models/data/normalization_spec.h)
  std::string input_mean, input_std;      // given normalization: one value per feature or channel, a,b,c
  std::string dataset = "fashion-mnist";  // fashion-mnist | idx | csv (when --train is not given)
  std::string data_dir = "/usr/share/datasets/fashion-mnist";  // idx and fashion-mnist: the IDX files
  std::string train_csv;                                       // deprecated name of --train for CSV
  std::string test_csv;                                        // deprecated name of --test for CSV
  std::string label_column = "label";                          // tables: column name or 0-based index
  std::string ignore_columns;   // tables: columns left out, a,b ("" = none; models/data/tabular_schema.h)
  std::string categorical;      // tables: category columns, sex,ward=icu|surgery ("" = none)
  bool missing_indicators = false;  // tables: one indicator input per numeric column
  std::string partition = "iid";                               // iid | dirichlet:ALPHA (simulations split one dataset)
  int site_index = 0;                                          // this site's part when the dataset is split
  int site_count = 1;                                          // number of parts

  // Model and optimizer
  std::string model = "mlp";             // logreg | mlp | cnn
  std::vector<int> widths = {256, 128};  // hidden layer widths (mlp only: logreg and cnn have fixed layers)
  std::string optimizer = "momentum";    // sgd | momentum | nesterov | adam | adamw
  double lr = 0.05;
  std::string schedule = "constant";  // constant | step:EPOCHS:FACTOR | cosine
  double momentum = 0.9;
  double weight_decay = 0.0;
  int batch = 64;
  double epochs = 5;   // over the site's part; fractions allowed (0.5 = half an epoch)
  int eval_every = 0;  // steps between test evaluations; 0 = once per epoch

  // Algorithm
  std::string algo = "sgp";     // an algorithm's name (daemon/algorithms/registry.h)
  int delay = 0;                // D: steps a mixed result may arrive late (dts, dsync); kAutoShape: auto
  int period = 1;               // P: dts averages every P steps
  int out_peers = 1;            // K: sgp out-peers per step
  int tau = 1;                  // τ: sgp may run τ steps ahead of the oldest expected message; kAutoShape: auto
  std::string grid = "auto";    // dsync: auto | AxB
  int min_sites = 0;            // sites in the view before training starts; 0: daemon/federation/min_sites.h
  double join_timeout = 300.0;  // seconds to wait for min-sites before giving up
  double round_timeout = kAutoDeadline;  // seconds before a mixing round is abandoned and redone; auto
  int reaverage_every = 100;    // steps between exact parameter re-averages; 0 = only on view change
  std::string compensation = "exact";  // dts: exact | no-momentum | off (stale) | local (gossip/dts.h)
  std::string compression = "none";    // none | fp16 (dts, sgp, diloco) | int8 (dts, diloco) | topk[:FRACTION] (dts)
  std::string exchange = "ring";  // dts, diloco: ring | direct | auto (how an exact mean travels; compression: direct)
  bool robust_aggregation = false;  // Byzantine-robust averages and push-sum receipts (gossip/robust_options.h)
  double robust_clip = 4.0;         // clip others' differences at this many times the own update scale; 0 = off
  int robust_trim = 1;              // trimmed mean drops this many values at each end; 0 = clip only
  bool secure_aggregation = false;  // exact means over pairwise-masked fixed-point shares (privacy/)
  double byzantine_scale = 0;       // fault injection: > 0 makes this site send garbage of this RMS scale
  // The values of the options each algorithm declares for itself (daemon/algorithms/algorithm_option.h).
  algorithms::OptionValues algorithm_options;

  // Privacy: DP-SGD (privacy/dp_sgd.h) is on when dp_epsilon or dp_noise_multiplier is > 0
  double dp_epsilon = 0;           // ε budget; σ from it, the data size, batch and run length; 0 = none
  double dp_delta = 1e-5;          // δ of the (ε, δ) guarantee
  double dp_clip = 0;              // C: each example's gradient clipped to this L2 norm (required with DP)
  double dp_noise_multiplier = 0;  // σ given directly instead of from dp_epsilon; 0 = from dp_epsilon
  bool dp() const { return dp_epsilon > 0 || dp_noise_multiplier > 0; }

  // WAN emulation
  std::string wan;                             // "" (none) | world4 | latency=..,jitter=..,bandwidth=..,loss=..
  std::string region;                          // with world4: oregon | ohio | london | tokyo
  double slowdown = 1;                         // emulated straggler: each step takes slowdown × its time without
                                               // waiting for other sites
  std::string wan_partition;                   // "" (none) | "s0,s1|s2,s3@20s+10s;..." (peer/partition_schedule.h)
  std::string wan_partition_origin = "start";  // start | training | UNIX_SECONDS: where the windows count from

  // Operations
  std::string checkpoint_dir;         // "" = RUN_DIR/checkpoints
  double checkpoint_interval = 60.0;  // seconds between checkpoints
  int checkpoint_keep = 3;
  std::string metrics_address = "127.0.0.1:9400";  // HOST:PORT, or "off"
  std::string control_socket;                      // "" = RUN_DIR/control.sock
  std::string device = "auto";                     // auto | cpu | cuda | cuda:N
  std::uint64_t seed = 1;
  int threads = 0;  // 0 = one per core
  std::string trainer = "builtin";  // builtin | attached (a local process trains: daemon/attached/attached_trainer.h)

  // The paths with their defaults applied.
  std::string checkpoint_dir_or_default() const;
  std::string control_socket_or_default() const;

  bool operator==(const SiteConfig&) const = default;
};

// Invalid configuration; what() lists every problem, one per line, each naming the option and giving a
// hint.
class SiteConfigError : public error::UserError {
 public:
  using error::UserError::UserError;
};

// Adds every SiteConfig field to `app` as a flag bound to `config`, plus --config FILE. Call
// apply_site_config_file() then validate_site_config() in the command's callback.
// `config` must outlive `app`'s parsing.
void bind_site_options(CLI::App& app, SiteConfig& config);

// Adds the options the algorithms declare (daemon/algorithms/registry.h, all_algorithm_options) to `app`
// as flags bound to `config`, with their brief help texts, in `group`: for a command that passes them on
// to sites (simulate). `config` must outlive `app`'s parsing.
void bind_algorithm_options(CLI::App& app, SiteConfig& config, const std::string& group);

// If --config FILE was given, reads FILE with CLI11's TOML reader and sets every option the command
// line did not set. Relative paths of the options that name files or folders (key-dir, roster,
// run-dir, the data paths, checkpoint-dir, control-socket), whether from FILE or their defaults, then
// count from FILE's folder; those given on the command line count from the current directory.
// Throws SiteConfigError naming the file and the key for an unknown key, a section, or a value that
// does not convert. `config` is the struct bound to `app`.
void apply_site_config_file(CLI::App& app, SiteConfig& config);

// `config` with each relative path option (see apply_site_config_file) that `selected` picks (by long
// name without "--"; an empty function picks all) taken relative to folder `from` and rewritten
// relative to folder `to` ("" is the current directory for both): what a config file written into `to`
// needs so that it reads back to the same files. Absolute and empty paths stay as they are.
SiteConfig rebase_site_paths(SiteConfig config, const std::filesystem::path& from, const std::filesystem::path& to,
                             const std::function<bool(std::string_view option)>& selected = {});

// The site configuration in `path` on top of the defaults, not validated (for commands that only need
// a few paths from it, such as the control socket). Throws SiteConfigError naming the file.
SiteConfig read_site_config_file(const std::string& path);

// Sets the defaults `config`'s algorithm picks for the knobs the user did not give (dts: D = 2, P = 16
// when neither --delay nor --period is given; daemon/algorithms/dts.h says why). `given` says whether an
// option, by its long name without "--", was given; an unknown --algo changes nothing.
void apply_algorithm_defaults(SiteConfig& config, const std::function<bool(std::string_view option)>& given);
// The same, with "given" read from the options of `app` (bound with bind_site_options; call after
// apply_site_config_file, whose values count as given).
void apply_algorithm_defaults(const CLI::App& app, SiteConfig& config);

// Every problem with `config`, each "--option: problem (hint)"; empty when valid.
std::vector<std::string> site_config_problems(const SiteConfig& config);
// Throws SiteConfigError listing site_config_problems() when there are any.
void validate_site_config(const SiteConfig& config);
// A site that listens on all interfaces (tcp://0.0.0.0:PORT, tcp://*:PORT, tcp://[::]:PORT) must say
// where peers reach it: "--advertise: missing: ..." when it does not, else nullopt. Not one of
// site_config_problems(), because a configuration used without a network (simulate's per-site files,
// in-process sites) may keep the default --listen; `init` and `start` ask for it before any work.
std::optional<std::string> unreachable_address_problem(const SiteConfig& config);

// A commented TOML file that bind_site_options + apply_site_config_file read back to `config` when it
// is read from the current directory; elsewhere, rebase its paths first (rebase_site_paths).
// `commented` (by long name without "--"), when given, picks keys to write as comments instead, each
// after the note it returns: reading the file back leaves those at their defaults (what `meridian
// init` does with the knobs its algorithm does not read or picks itself).
std::string render_site_config(
    const SiteConfig& config,
    const std::function<std::optional<std::string>(std::string_view option)>& commented = {});

// Parsed forms of the small option grammars the daemon owns (daemon/site_settings.cc parses them and
// the whole configuration; daemon/site_config.cc binds, reads and writes the options as given).
// (--partition is models/data/partition.h's parse_partition_spec, --wan peer/wan_model.h's
// parse_wan_spec.)
struct ScheduleSpec {
  enum class Kind { kConstant, kStep, kCosine } kind = Kind::kConstant;
  int step_epochs = 0;  // step: multiply the rate by step_factor every step_epochs epochs
  double step_factor = 1;
};
std::optional<ScheduleSpec> parse_schedule(const std::string& text);

// --grid: "auto" or ROWSxCOLS (gossip/group_grid.h).
using GridSpec = gossip::GridSpec;
std::optional<GridSpec> parse_grid(const std::string& text);

// --heartbeat-interval or --heartbeat-timeout in the milliseconds membership counts in (rounded to the
// nearest); only meaningful for a value site_config_problems() accepts.
std::chrono::milliseconds heartbeat_milliseconds(double seconds);

// --wan-partition-origin as a Unix time in seconds (finite, positive); nullopt for "start", "training"
// or anything that is not such a number.
std::optional<double> partition_origin_unix_seconds(const std::string& text);

// --exchange: how the exact means of dts and diloco travel (daemon/algorithms/algorithm.h).
enum class Exchange { kRing, kDirect, kAuto };
// --dataset.
enum class Dataset { kFashionMnist, kIdx, kCsv };
// "fashion-mnist", "idx" or "csv"; nullopt for anything else.
std::optional<Dataset> parse_dataset(const std::string& text);
// --wan-partition-origin: where the partition windows count from.
struct PartitionOrigin {
  enum class Kind { kStart, kTraining, kUnixTime } kind = Kind::kStart;
  double unix_seconds = 0;  // kUnixTime only
};

// The validated, typed configuration of one site. `options` keeps the options as given for the plain
// values (names, addresses, paths, numbers) and for the texts that go into logs and files; every option
// grammar is read once into the typed fields below, which are what the code past the boundary consults.
struct SiteSettings {
  SiteConfig options;
  // The registered algorithm options.algo names (daemon/algorithms/registry.h); throws
  // error::InternalError for a name none has, which parse_site_settings() never lets through.
  const algorithms::Algorithm& algorithm() const;
  models::OptimizerKind optimizer = models::OptimizerKind::momentum;
  ScheduleSpec schedule;
  gossip::CompressionSpec compression;
  GridSpec grid;
  gossip::DtsCompensation compensation = gossip::DtsCompensation::kExact;
  Exchange exchange = Exchange::kRing;
  Dataset dataset = Dataset::kFashionMnist;  // when options.train is empty
  std::vector<std::string> class_names;      // --classes; empty: from the data
  models::data::ArrayLayout layout = models::data::ArrayLayout::kUnstated;
  models::data::AugmentationSpec augmentation;    // --augment
  models::data::NormalizationSpec normalization;  // --normalize, --input-mean, --input-std
  models::data::TabularSpec tabular;              // --ignore-columns, --categorical, --missing-indicators
  models::data::PartitionSpec partition;
  peer::WanModel wan;
  peer::PartitionSchedule wan_partition;
  PartitionOrigin wan_partition_origin;
  models::DeviceRequest device;
  std::optional<std::string> metrics_address;  // HOST:PORT; nullopt for "off"
  double max_send_bits_per_s = 0;              // --max-send-rate; 0: no cap
};

// The one boundary from text to types: `config` read and checked, with every problem listed (each
// "--option: problem (hint)", the list site_config_problems() returns). `settings` is set only when
// there is none.
struct SiteSettingsParse {
  std::optional<SiteSettings> settings;
  std::vector<std::string> problems;
};
SiteSettingsParse parse_site_settings(const SiteConfig& config);
// The settings of a valid `config`; throws SiteConfigError listing every problem otherwise.
SiteSettings settings_of(const SiteConfig& config);

// The algorithm `settings` runs with the knobs that shape it, for the start-up log, e.g.
// "dts, D = 2, P = 16 (dts' default shape), exchange ring, compensation exact". Only the knobs the
// algorithm reads are named (daemon/algorithms/).
std::string describe_algorithm(const SiteSettings& settings);

}  // namespace meridian::daemon
