// The configuration boundary (daemon/site_config.h): the options as given become typed SiteSettings
// here, every problem listed at once; the small grammars this daemon owns are parsed here too.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <string_view>

#include "daemon/algorithms/registry.h"
#include "daemon/attached/attached_trainer.h"
#include "daemon/site_config.h"
#include "error/error.h"
#include "models/data/data_source.h"
#include "models/model_factory.h"
#include "peer/link_spec.h"

namespace meridian::daemon {
namespace {

bool is_one_of(const std::string& value, std::initializer_list<const char*> allowed) {
  return std::any_of(allowed.begin(), allowed.end(), [&](const char* a) { return value == a; });
}

std::string join_list(std::initializer_list<const char*> items) {
  std::string out;
  for (const char* item : items) out += (out.empty() ? "" : ", ") + std::string(item);
  return out;
}

// Whole-string number parsing: "0.5x" is not 0.5.
template <typename T>
std::optional<T> parse_number(std::string_view s) {
  T v{};
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

// Seconds as people write them: 0.5, 3, 1e-3.
std::string seconds_text(double seconds) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", seconds);
  return buf;
}

// tcp://HOST:PORT with a port in [min_port, 65535].
bool is_tcp_address(const std::string& address, int min_port) {
  constexpr std::string_view scheme = "tcp://";
  if (!address.starts_with(scheme)) return false;
  const auto colon = address.rfind(':');
  if (colon == std::string::npos || colon <= scheme.size()) return false;
  const auto port = parse_number<int>(std::string_view(address).substr(colon + 1));
  return port && *port >= min_port && *port <= 65535;
}

bool is_site_name(const std::string& name) {
  return !name.empty() && name.size() <= 64 && std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
           c == '-';
  });
}

// The problems of one configuration, each "--option: problem (hint)", in the order they are found.
struct Problems {
  std::vector<std::string>& list;

  void add(const std::string& option, const std::string& text) { list.push_back("--" + option + ": " + text); }
  void one_of(const std::string& option, const std::string& value, std::initializer_list<const char*> allowed) {
    if (!is_one_of(value, allowed)) add(option, "'" + value + "' is not one of " + join_list(allowed));
  }
  void at_least(const std::string& option, long long value, long long min) {
    if (value < min) add(option, std::to_string(value) + " is below the minimum " + std::to_string(min));
  }
  // A shared option that only some algorithms read (Algorithm::reads), given to a site that runs `algo`.
  void only_for(const std::string& algo, const std::string& option);
  // An option that only some algorithms declare, given to a site that runs `algo`.
  void only_for_declaring(const algorithms::AlgorithmOption& option, const std::string& algo);
};

// The algorithms for which `reads` holds, for messages: "dts", "dts and sgp", "dts, sgp and dsync".
std::string readers_of(const std::function<bool(const algorithms::Algorithm&)>& reads) {
  std::vector<std::string> names;
  for (const auto* a : algorithms::all_algorithms())
    if (reads(*a)) names.emplace_back(a->name());
  std::string out;
  for (std::size_t i = 0; i < names.size(); ++i)
    out += (i == 0 ? "" : i + 1 == names.size() ? " and " : ", ") + names[i];
  return out;
}

void Problems::only_for(const std::string& algo, const std::string& option) {
  add(option, "applies to " + readers_of([&](const algorithms::Algorithm& a) { return a.reads(option); }) +
                  " only (this site runs " + algo + ")");
}

void Problems::only_for_declaring(const algorithms::AlgorithmOption& option, const std::string& algo) {
  add(std::string(option.name), "applies to " +
                                    readers_of([&](const algorithms::Algorithm& a) { return a.declares(option); }) +
                                    " only (this site runs " + algo + ")");
}

// Name, keys, addresses and heartbeats.
void check_identity_and_network(const SiteConfig& c, Problems& p) {
  if (!is_site_name(c.name)) {
    p.add("name", c.name.empty() ? "missing (give the site a name, e.g. --name oregon)"
                                 : "'" + c.name + "' must be 1-64 letters, digits, '.', '_' or '-'");
  }
  if (!c.insecure) {
    if (c.key_dir.empty()) p.add("key-dir", "missing (create keys with 'meridian keygen', or use --insecure locally)");
    if (c.roster.empty()) p.add("roster", "missing (list the federation's sites and keys, or use --insecure locally)");
  }
  if (!is_tcp_address(c.listen, 0))
    p.add("listen", "'" + c.listen + "' is not tcp://HOST:PORT (e.g. tcp://0.0.0.0:7400)");
  if (!c.advertise.empty() && !is_tcp_address(c.advertise, 1)) {
    p.add("advertise", "'" + c.advertise + "' is not tcp://HOST:PORT (e.g. tcp://site.example.org:7400)");
  }
  for (const auto& peer : c.join) {
    // NAME@tcp://HOST:PORT names the site behind the address (needed with a roster that lists no address).
    const auto at = peer.find('@');
    const bool named = at != std::string::npos && at > 0 && is_site_name(peer.substr(0, at));
    if (!is_tcp_address(named ? peer.substr(at + 1) : peer, 1))
      p.add("join", "'" + peer + "' is not [NAME@]tcp://HOST:PORT (e.g. tcp://10.0.0.2:7400)");
  }
  // Membership counts in whole milliseconds; the upper bounds keep the conversion far from overflow, and
  // the interval's leaves room for a timeout of six intervals, which the hint below suggests.
  constexpr double kMaxHeartbeatSeconds = 86400;
  constexpr double kMaxHeartbeatIntervalSeconds = 3600;
  auto heartbeat_seconds_ok = [&](const std::string& option, double seconds, double most, const char* example) {
    if (std::isfinite(seconds) && seconds >= 0.001 && seconds <= most) return true;
    p.add(option, "must be a number of seconds from 0.001 to " + seconds_text(most) + " (e.g. " + example + ")");
    return false;
  };
  const bool interval_ok =
      heartbeat_seconds_ok("heartbeat-interval", c.heartbeat_interval, kMaxHeartbeatIntervalSeconds, "0.5");
  // auto (daemon/federation/deadlines.h) is never below six intervals.
  const bool timeout_auto = c.heartbeat_timeout == kAutoDeadline;
  const bool timeout_ok =
      timeout_auto || heartbeat_seconds_ok("heartbeat-timeout", c.heartbeat_timeout, kMaxHeartbeatSeconds, "3");
  if (interval_ok && timeout_ok && !timeout_auto &&
      heartbeat_milliseconds(c.heartbeat_timeout) <= heartbeat_milliseconds(c.heartbeat_interval)) {
    // One late heartbeat must not kill a member: the timeout has to span several of them.
    const char* margin = c.heartbeat_timeout > c.heartbeat_interval ? " (by a whole millisecond at least)" : "";
    p.add("heartbeat-timeout", seconds_text(c.heartbeat_timeout) + " s must exceed --heartbeat-interval " +
                                   seconds_text(c.heartbeat_interval) + " s" + margin +
                                   ": make it several intervals plus the round trip of the slowest link (e.g. " +
                                   seconds_text(6 * c.heartbeat_interval) + ")");
  }
  if (c.run_dir.empty()) p.add("run-dir", "must not be empty (e.g. --run-dir /var/lib/meridian)");
}

// Where the data is: --train and --test (the old CSV names folded into them, in settings.options), or a
// packaged dataset; and the class list and layout that go with --train.
void parse_data_paths(SiteSettings& settings, Problems& p) {
  const SiteConfig& c = settings.options;
  // --train names data by path; it replaces --dataset, whose old csv form (--train-csv, --test-csv) is
  // read as --train and --test from here on. The paths are resolved here (existence and format, no
  // data read) so that a mistyped one is listed with the rest.
  SiteConfig& d = settings.options;
  for (const auto& text : models::data::fold_legacy_csv_names(d.train, d.test, d.train_csv, d.test_csv).problems)
    p.list.push_back(text);
  if (!d.train.empty()) {
    if (d.dataset != "fashion-mnist" && d.dataset != "csv")
      p.add("train", "replaces --dataset " + d.dataset + ": give one of them");
    for (const auto& [option, path] : {std::pair{"train", &d.train}, std::pair{"test", &d.test}}) {
      if (path->empty()) continue;
      try {
        (void)models::data::resolve_data_path(*path);
      } catch (const models::data::DataError& e) {
        p.add(option, e.what());
      }
    }
  } else {
    for (const auto& [option, value] :
         {std::pair{"test", &d.test}, std::pair{"classes", &d.classes}, std::pair{"layout", &d.layout}}) {
      if (!value->empty()) p.add(option, "applies with --train only (give the training data as --train PATH)");
    }
  }
  if (!c.classes.empty()) {
    try {
      settings.class_names = models::data::parse_class_list(c.classes);
    } catch (const error::UserError& e) {
      p.add("classes", e.what());
    }
  }
  if (!c.layout.empty()) {
    try {
      settings.layout = models::data::parse_array_layout(c.layout);
    } catch (const error::UserError& e) {
      p.add("layout", e.what());
    }
  }
}

// What the data holds and how it is read, scaled and split.
void parse_data_forms(SiteSettings& settings, Problems& p) {
  const SiteConfig& c = settings.options;
  try {
    settings.tabular = models::data::parse_tabular_spec(c.ignore_columns, c.categorical, c.missing_indicators);
  } catch (const error::UserError& e) {
    p.add(std::string_view(e.what()).starts_with("--ignore-columns") ? "ignore-columns" : "categorical", e.what());
  }
  try {
    settings.augmentation = models::data::parse_augmentation_spec(c.augment);
  } catch (const error::UserError& e) {
    p.add("augment", e.what());
  }
  try {
    settings.normalization = models::data::parse_normalization_spec(c.normalize, c.input_mean, c.input_std);
  } catch (const error::UserError& e) {
    // The text names the other option where two disagree.
    p.add(c.input_mean.empty() && c.input_std.empty() ? "normalize" : "input-mean", e.what());
  }
  p.one_of("dataset", c.dataset, {"fashion-mnist", "idx", "csv"});
  const auto dataset = parse_dataset(c.dataset);
  if (dataset) settings.dataset = *dataset;
  if (dataset && settings.dataset != Dataset::kCsv && c.data_dir.empty()) {
    p.add("data-dir", "missing: the directory with the IDX files");
  }
  if (settings.dataset == Dataset::kCsv && c.train.empty())
    p.add("train", "missing: --dataset csv needs a training file (--train FILE.csv)");
  if (c.label_column.empty()) p.add("label-column", "must not be empty (a column name or 0-based index)");
  try {
    settings.partition = models::data::parse_partition_spec(c.partition);
  } catch (const error::UserError& e) {
    p.add("partition", e.what());
  }
  p.at_least("site-count", c.site_count, 1);
  if (c.site_index < 0 || c.site_index >= std::max(c.site_count, 1)) {
    p.add("site-index", std::to_string(c.site_index) + " is outside 0.." +
                            std::to_string(std::max(c.site_count, 1) - 1) + " (it must be below --site-count)");
  }
}

// The model, the optimizer and its schedule, and the run's length.
void parse_model_and_optimizer(SiteSettings& settings, Problems& p) {
  const SiteConfig& c = settings.options;
  // A built-in network or the path of a model file (docs/models.md); the file's own problems are
  // reported when the model is built from it, with the line.
  if (const auto& builtins = models::builtin_models();
      std::find(builtins.begin(), builtins.end(), c.model) == builtins.end() &&
      !std::filesystem::is_regular_file(c.model)) {
    std::string names;
    for (const auto& b : builtins) names += (names.empty() ? "" : ", ") + b;
    p.add("model", "'" + c.model + "' is not one of " + names + ", nor a model file");
  }
  if (c.model == "mlp" && c.widths.empty())
    p.add("widths", "missing: the mlp needs hidden layer widths (e.g. 256,128)");
  for (int w : c.widths) {
    if (w < 1) p.add("widths", std::to_string(w) + " is not a positive width");
  }
  p.one_of("optimizer", c.optimizer, {"sgd", "momentum", "nesterov", "adam", "adamw"});
  if (is_one_of(c.optimizer, {"sgd", "momentum", "nesterov", "adam", "adamw"}))
    settings.optimizer = models::parse_optimizer_kind(c.optimizer);
  if (!(std::isfinite(c.lr) && c.lr > 0)) p.add("lr", "must be a positive number (e.g. 0.05)");
  if (const auto schedule = parse_schedule(c.schedule)) {
    settings.schedule = *schedule;
  } else {
    p.add("schedule", "'" + c.schedule + "' is not constant, cosine or step:EPOCHS:FACTOR (e.g. step:2:0.5)");
  }
  if (!(c.momentum >= 0 && c.momentum < 1)) p.add("momentum", "must be in [0, 1) (e.g. 0.9)");
  if (!(std::isfinite(c.weight_decay) && c.weight_decay >= 0)) p.add("weight-decay", "must be 0 or positive");
  p.at_least("batch", c.batch, 1);
  if (!(std::isfinite(c.epochs) && c.epochs > 0)) p.add("epochs", "must be a positive number (e.g. 3 or 0.5)");
  p.at_least("eval-every", c.eval_every, 0);
}

// The shape knobs several algorithms read (their ranges alone) and --grid.
void parse_shape_knobs(SiteSettings& settings, Problems& p) {
  const SiteConfig& c = settings.options;
  if (c.delay != kAutoShape) p.at_least("delay", c.delay, 0);
  p.at_least("period", c.period, 1);
  p.at_least("out-peers", c.out_peers, 1);
  if (c.tau != kAutoShape) p.at_least("tau", c.tau, 1);
  if (const auto grid = parse_grid(c.grid)) {
    settings.grid = *grid;
  } else {
    p.add("grid", "'" + c.grid + "' is not auto or ROWSxCOLS (e.g. 2x4)");
  }
  p.at_least("reaverage-every", c.reaverage_every, 0);
}

// How the shares travel: --compensation, --compression and --exchange, each refused for an algorithm
// that does not read it (`algorithm` null: --algo named none).
void parse_exchange_knobs(SiteSettings& settings, const algorithms::Algorithm* algorithm, Problems& p) {
  const SiteConfig& c = settings.options;
  if (const auto compensation = gossip::parse_dts_compensation(c.compensation); !compensation) {
    p.add("compensation", "'" + c.compensation + "' is not exact, no-momentum, off or local");
  } else {
    settings.compensation = *compensation;
    if (*compensation != gossip::DtsCompensation::kExact && algorithm != nullptr && !algorithm->reads("compensation"))
      p.only_for(c.algo, "compensation");
  }
  if (const auto spec = gossip::parse_compression(c.compression); !spec) {
    p.add("compression", "'" + c.compression +
                             "' is not none, fp16, int8 or topk:FRACTION with FRACTION in (0, 0.5] (e.g. topk:0.01)");
  } else if (algorithm != nullptr && !algorithm->accepts(spec->encoding)) {
    const auto accepting = [&](gossip::Encoding e) {
      return readers_of([e](const algorithms::Algorithm& a) { return a.accepts(e); });
    };
    if (spec->encoding == gossip::Encoding::kTopK) {
      p.add("compression", "top-k with error feedback applies to " + accepting(spec->encoding) +
                               " only (its averages are of gradients; " + c.algo +
                               " mixes parameters, whose top-k would zero the rest); use fp16 or none");
    } else {
      p.add("compression",
            gossip::to_string(*spec) + " applies to " + accepting(spec->encoding) + " only (" + c.algo +
                (spec->encoding == gossip::Encoding::kFp16 ? " keeps its exact ring all-reduce" : " does not send it") +
                "); use none");
    }
  } else {
    settings.compression = *spec;
  }
  if (c.exchange != "ring" && c.exchange != "direct" && c.exchange != "auto") {
    p.add("exchange", "'" + c.exchange + "' is not ring, direct or auto");
  } else {
    settings.exchange = c.exchange == "direct" ? Exchange::kDirect
                        : c.exchange == "auto" ? Exchange::kAuto
                                               : Exchange::kRing;
    if (settings.exchange != Exchange::kRing && algorithm != nullptr && !algorithm->reads("exchange"))
      p.only_for(c.algo, "exchange");
  }
}

// The options algorithms declare for themselves: the declaring algorithm judges their ranges
// (check_with_algorithm); another refuses a value other than the default.
void check_declared_options(const SiteConfig& c, const algorithms::Algorithm* algorithm, Problems& p) {
  for (const auto* option : algorithms::all_algorithm_options()) {
    if (c.algorithm_options.differs_from_default(*option) && algorithm != nullptr && !algorithm->declares(*option))
      p.only_for_declaring(*option, c.algo);
  }
}

// Robust and secure aggregation, fault injection, and the waits for sites and rounds.
void check_robustness(const SiteConfig& c, const algorithms::Algorithm* algorithm, Problems& p) {
  p.at_least("robust-trim", c.robust_trim, 0);
  if (c.secure_aggregation) {
    // Push-sum shares are weighted and forwarded, not summed once over a round: pairwise masks would
    // not cancel in them (docs/privacy.md). local sends nothing, so there is nothing to mask, and
    // simulate can run it beside the others.
    if (algorithm != nullptr && algorithm->communicates() && !algorithm->takes_exact_means())
      p.add("secure-aggregation", "applies to " +
                                      readers_of([](const algorithms::Algorithm& a) { return a.takes_exact_means(); }) +
                                      " only, whose rounds take an exact mean (this site runs " + c.algo + ")");
    if (c.insecure) p.add("secure-aggregation", "needs the CurveZMQ keys its pair secrets come from; drop --insecure");
    if (c.robust_aggregation)
      p.add("secure-aggregation", "cannot be combined with --robust-aggregation, which needs each site's values");
    if (c.compression != "none") p.add("secure-aggregation", "sends dense fixed-point shares; use --compression none");
  }
  if (!(std::isfinite(c.robust_clip) && c.robust_clip >= 0)) p.add("robust-clip", "must be 0 (off) or positive");
  if (!(std::isfinite(c.byzantine_scale) && c.byzantine_scale >= 0))
    p.add("byzantine-scale", "must be 0 (an honest site) or positive");
  p.at_least("min-sites", c.min_sites, 0);
  if (!(std::isfinite(c.join_timeout) && c.join_timeout > 0))
    p.add("join-timeout", "must be a positive number of seconds");
  if (c.round_timeout != kAutoDeadline && !(std::isfinite(c.round_timeout) && c.round_timeout > 0))
    p.add("round-timeout", "must be a positive number of seconds or auto");
}

// The send cap and the emulated network: links, regions, stragglers and partitions.
void parse_wan(SiteSettings& settings, Problems& p) {
  const SiteConfig& c = settings.options;
  if (!c.max_send_rate.empty()) {
    try {
      settings.max_send_bits_per_s = peer::parse_rate(c.max_send_rate);
    } catch (const error::UserError& e) {
      p.add("max-send-rate", std::string(e.what()) + " (e.g. 50mbit or 10MB/s)");
    }
  }
  // peer/ owns the --wan grammar; a model with regions needs to know which one this site is in.
  try {
    settings.wan = peer::parse_wan_spec(c.wan);
    const auto& wan = settings.wan;
    if (wan.regions() > 1) {
      if (!wan.region_index(c.region)) {
        std::string names;
        for (std::size_t r = 0; r < wan.regions(); ++r) names += (r ? ", " : "") + wan.region_name(r);
        p.add("region", (c.region.empty() ? std::string("missing: name this site's region in")
                                          : "'" + c.region + "' is not a region of") +
                            " --wan " + c.wan + " (regions: " + names + ")");
      }
    } else if (!c.region.empty()) {
      p.add("region", "only applies with a --wan that has regions, such as world4");
    }
  } catch (const error::UserError& e) {
    p.add("wan", e.what());
  }
  if (!(std::isfinite(c.slowdown) && c.slowdown >= 1 && c.slowdown <= 1000))
    p.add("slowdown", "must be a factor from 1 (off) to 1000, e.g. 5 for a site five times slower");
  try {
    settings.wan_partition = peer::parse_partition_schedule(c.wan_partition);
  } catch (const error::UserError& e) {
    p.add("wan-partition", e.what());
  }
  if (c.wan_partition_origin == "training") {
    settings.wan_partition_origin.kind = PartitionOrigin::Kind::kTraining;
  } else if (const auto seconds = partition_origin_unix_seconds(c.wan_partition_origin)) {
    settings.wan_partition_origin = {PartitionOrigin::Kind::kUnixTime, *seconds};
  } else if (c.wan_partition_origin != "start") {
    p.add("wan-partition-origin", "must be start, training or a Unix time in seconds (e.g. from `date +%s`), not \"" +
                                      c.wan_partition_origin + "\"");
  }
}

// Checkpoints, metrics, the control socket, the device, threads and the trainer.
void parse_operations(SiteSettings& settings, const algorithms::Algorithm* algorithm, Problems& p) {
  const SiteConfig& c = settings.options;
  if (!(std::isfinite(c.checkpoint_interval) && c.checkpoint_interval > 0)) {
    p.add("checkpoint-interval", "must be a positive number of seconds (e.g. 60)");
  }
  p.at_least("checkpoint-keep", c.checkpoint_keep, 1);
  if (c.metrics_address != "off") {
    settings.metrics_address = c.metrics_address;
    const auto colon = c.metrics_address.rfind(':');
    const auto port = colon == std::string::npos
                          ? std::nullopt
                          : parse_number<int>(std::string_view(c.metrics_address).substr(colon + 1));
    if (colon == std::string::npos || colon == 0 || !port || *port < 0 || *port > 65535) {
      p.add("metrics-address", "'" + c.metrics_address + "' is not HOST:PORT or off (e.g. 127.0.0.1:9400)");
    }
  }
  // A Unix socket address holds at most 107 bytes of path.
  if (c.control_socket_or_default().size() > 107) {
    p.add("control-socket", "path '" + c.control_socket_or_default() +
                                "' is longer than a Unix socket allows (107 bytes); choose a shorter one");
  }
  // The grammar lives in models/device.h (the trainer resolves the same text); only the wording is ours.
  try {
    settings.device = models::parse_device(c.device);
  } catch (const models::DeviceError&) {
    p.add("device", "'" + c.device + "' is not auto, cpu, cuda or cuda:N");
  }
  p.at_least("threads", c.threads, 0);
  if (c.trainer != "builtin" && c.trainer != "attached")
    p.add("trainer", "'" + c.trainer + "' is not builtin or attached");
  else if (c.trainer == "attached" && algorithm != nullptr)
    if (auto text = attached_support_problem(settings); !text.empty()) p.add("trainer", text);
}

void check_dp(const SiteSettings& settings, Problems& p) {
  const SiteConfig& c = settings.options;
  // DP-SGD. Whether the model can clip per example (no batch norm) and the backend is the CPU's is
  // known once the model is built: the daemon refuses those before it joins (site_daemon.cc).
  if (!(std::isfinite(c.dp_epsilon) && c.dp_epsilon >= 0)) p.add("dp-epsilon", "must be 0 (no DP-SGD) or positive");
  if (!(std::isfinite(c.dp_noise_multiplier) && c.dp_noise_multiplier >= 0))
    p.add("dp-noise-multiplier", "must be 0 (from --dp-epsilon) or positive");
  if (c.dp()) {
    if (!(c.dp_delta > 0 && c.dp_delta < 1)) p.add("dp-delta", "must lie between 0 and 1 (e.g. 1e-5)");
    if (!(std::isfinite(c.dp_clip) && c.dp_clip > 0))
      p.add("dp-clip", "missing: DP-SGD clips each example's gradient to this norm; give a positive value (e.g. 1)");
    if (c.trainer == "attached")
      p.add("trainer", "attached trainers compute their own gradients: DP-SGD (--dp-*) runs with the builtin trainer");
    if (settings.device.kind == models::DeviceRequest::Kind::kCuda)
      p.add("device", "DP-SGD's per-example clipping runs on the CPU backend only; use --device cpu with --dp-*");
  } else if (c.dp_clip != 0) {
    p.add("dp-clip", "applies with DP-SGD only: give --dp-epsilon or --dp-noise-multiplier");
  }
}

// What only the algorithm knows, on the options as parsed (one that did not parse holds its default),
// then the ranges its own options declare.
void check_with_algorithm(const SiteSettings& settings, const algorithms::Algorithm& algorithm, Problems& p) {
  algorithm.check(settings, p.list);
  for (const auto* option : algorithm.options()) {
    if (option->range == nullptr) continue;
    if (auto text = option->range(settings.options.algorithm_options.get(*option)); !text.empty())
      p.add(std::string(option->name), text);
  }
}

}  // namespace

std::optional<ScheduleSpec> parse_schedule(const std::string& text) {
  if (text == "constant") return ScheduleSpec{};
  if (text == "cosine") return ScheduleSpec{ScheduleSpec::Kind::kCosine, 0, 1};
  constexpr std::string_view prefix = "step:";
  if (!text.starts_with(prefix)) return std::nullopt;
  const std::string_view rest = std::string_view(text).substr(prefix.size());
  const auto colon = rest.find(':');
  if (colon == std::string_view::npos) return std::nullopt;
  const auto epochs = parse_number<int>(rest.substr(0, colon));
  const auto factor = parse_number<double>(rest.substr(colon + 1));
  if (!epochs || *epochs < 1 || !factor || !std::isfinite(*factor) || *factor <= 0) return std::nullopt;
  return ScheduleSpec{ScheduleSpec::Kind::kStep, *epochs, *factor};
}

std::chrono::milliseconds heartbeat_milliseconds(double seconds) {
  return std::chrono::milliseconds(std::llround(seconds * 1000.0));
}

std::optional<double> partition_origin_unix_seconds(const std::string& text) {
  double seconds = 0;
  const auto* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, seconds);
  if (text.empty() || ec != std::errc() || ptr != end || !std::isfinite(seconds) || seconds <= 0) return std::nullopt;
  return seconds;
}

std::optional<Dataset> parse_dataset(const std::string& text) {
  if (text == "fashion-mnist") return Dataset::kFashionMnist;
  if (text == "idx") return Dataset::kIdx;
  if (text == "csv") return Dataset::kCsv;
  return std::nullopt;
}

std::optional<GridSpec> parse_grid(const std::string& text) {
  if (text == "auto") return GridSpec{};
  const auto x = text.find('x');
  if (x == std::string::npos) return std::nullopt;
  const auto rows = parse_number<int>(std::string_view(text).substr(0, x));
  const auto cols = parse_number<int>(std::string_view(text).substr(x + 1));
  if (!rows || !cols || *rows < 1 || *cols < 1) return std::nullopt;
  return GridSpec{*rows, *cols};
}

const algorithms::Algorithm& SiteSettings::algorithm() const { return algorithms::algorithm_for(options.algo); }

std::string describe_algorithm(const SiteSettings& settings) {
  const auto& algorithm = settings.algorithm();
  std::string out(algorithm.name());
  if (const auto knobs = algorithm.describe_knobs(settings); !knobs.empty()) out += ", " + knobs;
  if (settings.options.robust_aggregation) out += ", robust aggregation";
  return out;
}

SiteSettingsParse parse_site_settings(const SiteConfig& c) {
  SiteSettings settings;
  settings.options = c;
  std::vector<std::string> problems;
  Problems p{problems};
  check_identity_and_network(c, p);
  parse_data_paths(settings, p);
  parse_data_forms(settings, p);
  parse_model_and_optimizer(settings, p);
  const algorithms::Algorithm* algorithm = algorithms::find_algorithm(c.algo);
  if (algorithm == nullptr) p.add("algo", "'" + c.algo + "' is not one of " + algorithms::algorithm_names());
  parse_shape_knobs(settings, p);
  parse_exchange_knobs(settings, algorithm, p);
  check_declared_options(c, algorithm, p);
  check_robustness(c, algorithm, p);
  parse_wan(settings, p);
  parse_operations(settings, algorithm, p);
  check_dp(settings, p);
  if (algorithm != nullptr) check_with_algorithm(settings, *algorithm, p);
  if (!problems.empty()) return {std::nullopt, std::move(problems)};
  return {std::move(settings), {}};
}

std::vector<std::string> site_config_problems(const SiteConfig& config) { return parse_site_settings(config).problems; }

SiteSettings settings_of(const SiteConfig& config) {
  auto parsed = parse_site_settings(config);
  if (parsed.settings) return std::move(*parsed.settings);
  std::string text = "invalid site configuration:";
  for (const auto& p : parsed.problems) text += "\n  " + p;
  throw SiteConfigError(text);
}

void validate_site_config(const SiteConfig& config) { (void)settings_of(config); }

std::optional<std::string> unreachable_address_problem(const SiteConfig& config) {
  const std::string& listen = config.listen;
  const bool all_interfaces =
      listen.starts_with("tcp://0.0.0.0:") || listen.starts_with("tcp://*:") || listen.starts_with("tcp://[::]:");
  if (!all_interfaces || !config.advertise.empty()) return std::nullopt;
  return "--advertise: missing: with --listen " + listen +
         " (all interfaces) give the address peers connect to, e.g. tcp://10.0.0.1:7400";
}

}  // namespace meridian::daemon
