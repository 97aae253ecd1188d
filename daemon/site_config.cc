#include "daemon/site_config.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <type_traits>
#include <utility>
#include <variant>

#include "daemon/algorithms/registry.h"

namespace meridian::daemon {
namespace {

static_assert(kAutoShape == algorithms::kAutoOptionValue, "auto is one value in every whole-number option");

// One option: how it is bound to a CLI11 app and how it is written into a config file. Keeping both in
// one table is what makes `meridian init` output read back to the same values.
struct OptionSpec {
  std::string group;
  std::string name;
  std::string help;
  std::function<CLI::Option*(CLI::App&, SiteConfig&)> bind;
  std::function<std::string(const SiteConfig&)> toml;
  // Lists only: empties the field. CLI11 wants at least one value per list option, so an empty list
  // in a file ("join = []") is applied here instead.
  std::function<void(SiteConfig&)> clear;
  // Options that name files or folders: the field, for rebasing relative paths (path_field).
  std::string SiteConfig::*path = nullptr;
};

std::string toml_value(const std::string& s) {
  // CLI11's reader strips one pair of quotes and does not process escapes, so pick the quote that
  // does not occur in the value.
  if (s.find('"') == std::string::npos) return '"' + s + '"';
  if (s.find('\'') == std::string::npos) return '\'' + s + '\'';
  throw SiteConfigError("a value holding both kinds of quote cannot be written to a config file: " + s);
}
std::string toml_value(bool b) { return b ? "true" : "false"; }
std::string toml_value(int v) { return std::to_string(v); }
std::string toml_value(std::uint64_t v) { return std::to_string(v); }
std::string toml_value(double v) {
  char buf[64];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  std::string s(buf, end);
  // TOML wants a float to look like one; CLI11 does not care, but people reading the file do.
  if (s.find_first_of(".eE") == std::string::npos) s += ".0";
  return s;
}
template <typename T>
std::string toml_value(const std::vector<T>& values) {
  std::string out = "[";
  for (std::size_t i = 0; i < values.size(); ++i) out += (i ? ", " : "") + toml_value(values[i]);
  return out + "]";
}

template <typename T>
OptionSpec field(std::string group, std::string name, std::string help, T SiteConfig::*member) {
  OptionSpec spec{std::move(group), name, help, nullptr, nullptr, nullptr, nullptr};
  spec.bind = [name, help, member](CLI::App& app, SiteConfig& config) -> CLI::Option* {
    if constexpr (std::is_same_v<T, bool>) {
      return app.add_flag("--" + name, config.*member, help);
    } else if constexpr (std::is_same_v<T, std::vector<int>> || std::is_same_v<T, std::vector<std::string>>) {
      return app.add_option("--" + name, config.*member, help)->delimiter(',')->capture_default_str();
    } else {
      return app.add_option("--" + name, config.*member, help)->capture_default_str();
    }
  };
  spec.toml = [member](const SiteConfig& config) { return toml_value(config.*member); };
  if constexpr (std::is_same_v<T, std::vector<int>> || std::is_same_v<T, std::vector<std::string>>) {
    spec.clear = [member](SiteConfig& config) { (config.*member).clear(); };
  }
  return spec;
}

// A whole-number field that also takes "auto" (--delay, --tau).
OptionSpec shape_field(std::string group, std::string name, std::string help, int SiteConfig::*member) {
  OptionSpec spec{std::move(group), name, help, nullptr, nullptr, nullptr, nullptr};
  spec.bind = [name, help, member](CLI::App& app, SiteConfig& config) {
    return bind_shape_option(app, name, config.*member, help);
  };
  spec.toml = [member](const SiteConfig& config) {
    return config.*member == kAutoShape ? toml_value(std::string("auto")) : toml_value(config.*member);
  };
  return spec;
}

// A number of seconds that also takes "auto" (--round-timeout, --heartbeat-timeout).
OptionSpec deadline_field(std::string group, std::string name, std::string help, double SiteConfig::*member) {
  OptionSpec spec{std::move(group), name, help, nullptr, nullptr, nullptr, nullptr};
  spec.bind = [name, help, member](CLI::App& app, SiteConfig& config) {
    return bind_deadline_option(app, name, config.*member, help);
  };
  spec.toml = [member](const SiteConfig& config) {
    return config.*member == kAutoDeadline ? toml_value(std::string("auto")) : toml_value(config.*member);
  };
  return spec;
}

// A field that names a file or folder: relative values in a config file count from the file's folder.
OptionSpec path_field(std::string group, std::string name, std::string help, std::string SiteConfig::*member) {
  OptionSpec spec = field(std::move(group), std::move(name), std::move(help), member);
  spec.path = member;
  return spec;
}

// `path` taken relative to `from` and written relative to `to` (both folders; "" is the current one).
// Absolute and empty paths stay. A data pair FEATURES,LABELS (models/data/data_source.h) is two paths.
std::string rebase_path(const std::string& path, const std::filesystem::path& from, const std::filesystem::path& to) {
  namespace fs = std::filesystem;
  if (path.empty() || fs::path(path).is_absolute()) return path;
  const auto comma = path.find(',');
  if (comma != std::string::npos && !fs::exists(from / path))
    return rebase_path(path.substr(0, comma), from, to) + "," + rebase_path(path.substr(comma + 1), from, to);
  fs::path target = (from / path).lexically_normal();
  if (!target.has_filename() && target.has_parent_path()) target = target.parent_path();  // "a/b/" is "a/b"
  if (to.empty()) return target.empty() ? "." : target.string();
  const fs::path relative = fs::absolute(target).lexically_relative(fs::absolute(to).lexically_normal());
  return relative.empty() ? target.string() : relative.string();
}

// An option an algorithm declares, bound as `meridian start` binds a field of the same type: same type
// name, same default shown, same conversion errors.
template <typename T>
CLI::Option* bind_declared(CLI::App& app, SiteConfig& config, const algorithms::AlgorithmOption& option,
                           std::string_view help) {
  algorithms::OptionValues* values = &config.algorithm_options;
  const algorithms::AlgorithmOption* declared = &option;
  return app
      .add_option_function<T>(
          "--" + std::string(option.name), [values, declared](const T& value) { values->set(*declared, value); },
          std::string(help))
      ->default_function(
          [values, declared] { return CLI::detail::checked_to_string<T, T>(std::get<T>(values->get(*declared))); })
      ->capture_default_str();
}

CLI::Option* bind_declared(CLI::App& app, SiteConfig& config, const algorithms::AlgorithmOption& option,
                           std::string_view help) {
  if (option.takes_auto) {
    // As --delay and --tau: a whole number or auto.
    algorithms::OptionValues* values = &config.algorithm_options;
    const algorithms::AlgorithmOption* declared = &option;
    const std::string flag = "--" + std::string(option.name);
    return app
        .add_option_function<std::string>(
            flag,
            [values, declared, flag](const std::string& text) {
              const auto value = algorithms::parse_option_value(*declared, text);
              if (!value) throw CLI::ValidationError(flag, "'" + text + "' is not a whole number or auto");
              values->set(*declared, *value);
            },
            std::string(help))
        ->type_name("INT|auto")
        ->default_function(
            [values, declared] { return algorithms::option_value_text(*declared, values->get(*declared)); })
        ->capture_default_str();
  }
  return option.is_whole() ? bind_declared<int>(app, config, option, help)
                           : bind_declared<double>(app, config, option, help);
}

OptionSpec declared_field(std::string group, const algorithms::AlgorithmOption& option) {
  OptionSpec spec{std::move(group), std::string(option.name), std::string(option.help), nullptr, nullptr, nullptr,
                  nullptr};
  spec.bind = [&option](CLI::App& app, SiteConfig& config) { return bind_declared(app, config, option, option.help); };
  spec.toml = [&option](const SiteConfig& config) {
    const auto& value = config.algorithm_options.get(option);
    if (option.takes_auto && value == algorithms::OptionValue{algorithms::kAutoOptionValue})
      return toml_value(std::string("auto"));
    return std::visit([](auto v) { return toml_value(v); }, value);
  };
  return spec;
}

// The shared options, in the order of the help and of `meridian init`'s file. The entry with no name
// stands for the options the algorithms declare (option_specs puts them there).
const std::vector<OptionSpec>& shared_option_specs() {
  static const std::vector<OptionSpec> specs = [] {
    using C = SiteConfig;
    const std::string id = "Identity and network", data = "Data", model = "Model and optimizer", algo = "Algorithm",
                      wan = "WAN emulation", ops = "Operations", privacy = "Privacy";
    return std::vector<OptionSpec>{
        field(id, "name", "Name of this site, unique in the federation (letters, digits, '.', '_', '-')", &C::name),
        path_field(id, "key-dir", "Directory with this site's CurveZMQ key pair (create it with 'meridian keygen')",
                   &C::key_dir),
        path_field(id, "roster",
                   "Roster file, plain text: one line NAME PUBLIC_KEY [ADDRESS] per site allowed in the federation "
                   "(the key as meridian keygen prints it)",
                   &C::roster),
        field(id, "listen",
              "Address to listen on, tcp://HOST:PORT (port 0: any free port, written to RUN_DIR/endpoint)", &C::listen),
        field(id, "advertise",
              "Address peers connect to, tcp://HOST:PORT (\"\" = the listen address; required with 0.0.0.0)",
              &C::advertise),
        field(id, "join",
              "Bootstrap peers to join through, [NAME@]tcp://HOST:PORT (repeat the flag or separate with ',')",
              &C::join),
        field(id, "insecure", "No encryption or authentication: local experiments only, never across sites",
              &C::insecure),
        field(id, "heartbeat-interval", "Seconds between the heartbeats this site sends to every live member",
              &C::heartbeat_interval),
        deadline_field(id, "heartbeat-timeout",
                       "Seconds of silence after which a member is declared dead and left out of the next view, or "
                       "auto: from the measured gaps between heartbeats, at least 6 intervals (docs/operations.md)",
                       &C::heartbeat_timeout),
        path_field(id, "run-dir", "Directory for checkpoints and the control socket unless those are set", &C::run_dir),
        field(id, "max-send-rate",
              "Cap on everything this site sends, over all its peers: a rate such as 50mbit or 10MB/s (\"\" = no "
              "cap); messages wait until the cap lets them go",
              &C::max_send_rate),
        path_field(data, "train",
                   "Training data, format from the path: an image folder (one subfolder per class), FILE.npz, "
                   "FEATURES.npy,LABELS.npy, FILE.csv or an IDX images file (see docs/datasets.md); replaces --dataset",
                   &C::train),
        path_field(data, "test", "With --train: test data in the same form (optional; without it no test accuracy)",
                   &C::test),
        field(data, "classes",
              "With --train: the class list a,b,c, the same at every site (\"\" = from the data); a site may hold "
              "only some of them",
              &C::classes),
        field(data, "layout", "With --train: axis order of 4-D NumPy features: nchw | nhwc", &C::layout),
        field(data, "augment",
              "Image augmentation while training: none | crop:N | flip | crop:N,flip (e.g. crop:4,flip)", &C::augment),
        field(data, "normalize",
              "Input scaling, the same on every site: auto (from the federation for tables, none for images) | "
              "federation (per feature or channel, from every site's moments) | none",
              &C::normalize),
        field(data, "input-mean", "Given input scaling: the mean of each feature or channel, a,b,c (with --input-std)",
              &C::input_mean),
        field(data, "input-std", "Given input scaling: the standard deviation of each feature or channel, a,b,c",
              &C::input_std),
        field(data, "dataset", "fashion-mnist | idx | csv (used when --train is not given)", &C::dataset),
        path_field(data, "data-dir", "IDX files (train-images-idx3-ubyte[.gz], ...) for fashion-mnist and idx",
                   &C::data_dir),
        path_field(data, "train-csv", "Deprecated: the old name of --train for a CSV file", &C::train_csv),
        path_field(data, "test-csv", "Deprecated: the old name of --test for a CSV file", &C::test_csv),
        field(data, "label-column", "Tables: name or 0-based index of the label column", &C::label_column),
        field(data, "ignore-columns", "Tables: columns to leave out, such as identifiers: a,b (e.g. id,mrn)",
              &C::ignore_columns),
        field(data, "categorical",
              "Tables: columns holding categories, one-hot encoded: a,b, each optionally with its full list "
              "(e.g. sex,ward=icu|medicine|surgery); the lists are part of the federation terms",
              &C::categorical),
        field(data, "missing-indicators",
              "Tables: add an input per numeric column that is 1 where the value was missing (missing values "
              "are filled with the federation's mean)",
              &C::missing_indicators),
        field(data, "partition", "How simulations split one dataset: iid | dirichlet:ALPHA (e.g. dirichlet:0.5)",
              &C::partition),
        field(data, "site-index", "This site's part of a split dataset, 0..site-count-1", &C::site_index),
        field(data, "site-count", "Number of parts the dataset is split into (1 = use it all)", &C::site_count),
        field(model, "model", "logreg | mlp | mlp-bn | cnn | resnet8 | resnet20, or a model file (docs/models.md)",
              &C::model),
        field(model, "widths",
              "Hidden layer widths of the mlp, e.g. 256,128 (logreg and the LeNet-style cnn have fixed layers)",
              &C::widths),
        field(model, "optimizer", "sgd | momentum | nesterov | adam | adamw (decoupled weight decay)", &C::optimizer),
        field(model, "lr", "Learning rate", &C::lr),
        field(model, "schedule", "Learning-rate schedule: constant | step:EPOCHS:FACTOR (e.g. step:2:0.5) | cosine",
              &C::schedule),
        field(model, "momentum", "Momentum coefficient m for momentum and nesterov, in [0, 1)", &C::momentum),
        field(model, "weight-decay", "L2 weight decay", &C::weight_decay),
        field(model, "batch", "Local batch size", &C::batch),
        field(model, "epochs", "Epochs over the site's part of the data (fractions allowed, e.g. 0.5)", &C::epochs),
        field(model, "eval-every", "Steps between test-set evaluations (0 = once per epoch)", &C::eval_every),
        field(algo, "algo", algorithms::algorithm_names(" | "), &C::algo),
        shape_field(algo, "delay",
                    "D: steps a mixed result may arrive late, with delayed compensation (dts, dsync; sgp overlaps by "
                    "--tau, diloco and diloco-gossip by --overlap), or auto: chosen from the measured round trip and "
                    "step time (dts: D and P = 8D; docs/algorithms.md). dts without --delay and --period runs D = 2, "
                    "P = 16",
                    &C::delay),
        field(algo, "period",
              "P: dts starts an average every P steps (see --delay for its default shape; diloco's and "
              "diloco-gossip's H is --inner-steps)",
              &C::period),
        field(algo, "out-peers", "K: sgp's out-peers per step; diloco-gossip's per outer step", &C::out_peers),
        shape_field(algo, "tau",
                    "tau: sgp may run this many steps ahead of the oldest message it expects, or auto: chosen from the "
                    "measured round trip and step time (docs/algorithms.md)",
                    &C::tau),
        field(algo, "grid", "dsync: auto | AxB (rows x columns of sites)", &C::grid),
        field(algo, "min-sites",
              "Sites that must be in the view before training starts (0 = the roster's quorum or size; with "
              "--insecure, --site-count)",
              &C::min_sites),
        field(algo, "join-timeout", "Seconds to wait for --min-sites sites before giving up", &C::join_timeout),
        deadline_field(algo, "round-timeout",
                       "Seconds after which a mixing round is abandoned and redone without the late sites, or auto: "
                       "from the measured durations of this site's mixes (docs/operations.md)",
                       &C::round_timeout),
        field(algo, "reaverage-every", "Steps between exact parameter re-averages (0 = only on a view change)",
              &C::reaverage_every),
        field(algo, "compensation",
              "dts: exact | no-momentum (fix w only) | off (apply the average D steps late, no local step) | local "
              "(never average)",
              &C::compensation),
        field(algo, "compression",
              "Mixer messages: none | fp16 (dts, sgp, diloco, diloco-gossip) | int8 (dts, diloco; a scale per block of "
              "256) | "
              "topk:FRACTION (dts, with error feedback; e.g. topk:0.01)",
              &C::compression),
        field(algo, "exchange",
              "dts, diloco: how each exact average travels: ring (exact ring all-reduce, 2(n-1) link crossings in a "
              "row, 2(n-1)/n copies sent) | direct (every site sends to every other: one crossing, n-1 copies sent) | "
              "auto (direct while the view has at most 8 sites, the ring above; diloco's default); compressed "
              "averages always go direct",
              &C::exchange),
        OptionSpec{algo, "", "", nullptr, nullptr, nullptr, nullptr},  // the algorithms' own options
        field(algo, "robust-aggregation",
              "Byzantine-robust mixing: trimmed mean in group averages, norm clipping of others' contributions "
              "(every site of a federation must agree)",
              &C::robust_aggregation),
        field(algo, "robust-clip",
              "With --robust-aggregation: clip another site's difference at this many times this site's own update "
              "scale (0 = no clipping)",
              &C::robust_clip),
        field(algo, "robust-trim",
              "With --robust-aggregation: values dropped at each end of every coordinate when a group has at least "
              "2*trim+1 sites (0 = clipping only)",
              &C::robust_trim),
        field(algo, "secure-aggregation",
              "Mask every share with pairwise secrets from the sites' CurveZMQ keys so that peers see only the "
              "exact mean (allreduce, dts, dsync, diloco; every site of a federation must agree; docs/privacy.md)",
              &C::secure_aggregation),
        field(algo, "byzantine-scale",
              "Fault injection for experiments: > 0 makes this site send random garbage this many times the RMS "
              "of its honest vectors (0 = honest)",
              &C::byzantine_scale),
        field(privacy, "dp-epsilon",
              "DP-SGD with this (epsilon, delta) budget: Poisson-sampled batches, per-example clipping and Gaussian "
              "noise, the noise multiplier chosen from the budget, the data size, --batch and the run's length; "
              "training stops before a step that would exceed it (0 = no DP-SGD; docs/privacy.md)",
              &C::dp_epsilon),
        field(privacy, "dp-delta", "DP-SGD: delta of the (epsilon, delta) guarantee, below 1 / the examples",
              &C::dp_delta),
        field(privacy, "dp-clip", "DP-SGD: each example's gradient is clipped to this L2 norm (required with DP-SGD)",
              &C::dp_clip),
        field(privacy, "dp-noise-multiplier",
              "DP-SGD: the noise multiplier sigma given directly (noise std = sigma * clip) instead of from "
              "--dp-epsilon, which is then only the budget (0 = from --dp-epsilon)",
              &C::dp_noise_multiplier),
        field(wan, "wan", "Emulated links: \"\" (none) | world4 | latency=120ms,jitter=10ms,bandwidth=50mbit,loss=0.01",
              &C::wan),
        field(wan, "region", "With --wan world4: oregon | ohio | london | tokyo", &C::region),
        field(wan, "slowdown",
              "Emulated straggler: every step takes this many times as long as it would, not counting the time "
              "spent waiting for other sites (1 = as fast as it can)",
              &C::slowdown),
        field(wan, "wan-partition",
              "Emulated partitions, the same on every site: \"s0,s1|s2,s3@20s+10s\" cuts s0,s1 from s2,s3 "
              "from 20 s after start for 10 s; \"s3|*@20s+120s\" cuts s3 from every other site; \"s0|s1@30s+30s "
              "every 180s\" flaps a link, down 30 s of every 180 s; windows separated by ';' (\"\" = none)",
              &C::wan_partition),
        field(wan, "wan-partition-origin",
              "Where the --wan-partition windows count from: start (this site's start), training (its first "
              "round: every site of a run starts training at the same round, so all cut together however "
              "long each took to start) or a Unix time in seconds, the same on every site",
              &C::wan_partition_origin),
        path_field(ops, "checkpoint-dir", "Checkpoint directory (\"\" = RUN_DIR/checkpoints)", &C::checkpoint_dir),
        field(ops, "checkpoint-interval", "Seconds between checkpoints", &C::checkpoint_interval),
        field(ops, "checkpoint-keep", "Checkpoints kept (the newest)", &C::checkpoint_keep),
        field(ops, "metrics-address", "Prometheus /metrics on HOST:PORT, or off", &C::metrics_address),
        path_field(ops, "control-socket", "Control socket for status/peers/leave (\"\" = RUN_DIR/control.sock)",
                   &C::control_socket),
        field(ops, "device", "auto | cpu | cuda | cuda:N", &C::device),
        field(ops, "seed", "Random seed (initial model, data order)", &C::seed),
        field(ops, "threads", "Compute threads (0 = one per core)", &C::threads),
        field(ops, "trainer",
              "builtin (this daemon trains --model on its data) | attached (a local PyTorch process trains, "
              "through the meridian Python package; docs/pytorch.md)",
              &C::trainer),
    };
  }();
  return specs;
}

// Every option: the shared ones with the algorithms' own in their place. Built on each call, as an
// algorithm registered by a test adds options.
std::vector<OptionSpec> option_specs() {
  std::vector<OptionSpec> specs;
  for (const auto& spec : shared_option_specs()) {
    if (!spec.name.empty()) {
      specs.push_back(spec);
      continue;
    }
    for (const auto* option : algorithms::all_algorithm_options()) specs.push_back(declared_field(spec.group, *option));
  }
  return specs;
}

}  // namespace

std::optional<int> parse_shape_knob(std::string_view text) {
  if (text == "auto") return kAutoShape;
  int value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < 0) return std::nullopt;
  return value;
}

std::string shape_knob_text(int value) { return value == kAutoShape ? "auto" : std::to_string(value); }

CLI::Option* bind_shape_option(CLI::App& app, const std::string& name, int& field, const std::string& help) {
  int* target = &field;
  return app
      .add_option_function<std::string>(
          "--" + name,
          [target, name](const std::string& text) {
            const auto value = parse_shape_knob(text);
            if (!value) throw CLI::ValidationError("--" + name, "'" + text + "' is not a whole number >= 0 or auto");
            *target = *value;
          },
          help)
      ->type_name("INT|auto")
      ->default_function([target] { return shape_knob_text(*target); })
      ->capture_default_str();
}

CLI::Option* bind_deadline_option(CLI::App& app, const std::string& name, double& field, const std::string& help) {
  double* target = &field;
  return app
      .add_option_function<std::string>(
          "--" + name,
          [target, name](const std::string& text) {
            if (text == "auto") {
              *target = kAutoDeadline;
              return;
            }
            double value = 0;
            const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
            if (ec != std::errc() || end != text.data() + text.size())
              throw CLI::ValidationError("--" + name, "'" + text + "' is not a number of seconds or auto");
            *target = value;
          },
          help)
      ->type_name("SECONDS|auto")
      ->default_function([target] {
        if (*target == kAutoDeadline) return std::string("auto");
        std::string text = toml_value(*target);
        return text;
      })
      ->capture_default_str();
}

std::string SiteConfig::checkpoint_dir_or_default() const {
  return checkpoint_dir.empty() ? run_dir + "/checkpoints" : checkpoint_dir;
}

std::string SiteConfig::control_socket_or_default() const {
  return control_socket.empty() ? run_dir + "/control.sock" : control_socket;
}

void bind_site_options(CLI::App& app, SiteConfig& config) {
  app.add_option("--config",
                 "Read options from FILE (TOML, as written by 'meridian init'); "
                 "flags on the command line win over the file")
      ->type_name("FILE")
      ->check(CLI::Validator(CLI::ExistingFile).description(""));  // no ":FILE" after the type in --help
  for (const auto& spec : option_specs()) spec.bind(app, config)->group(spec.group);
}

void bind_algorithm_options(CLI::App& app, SiteConfig& config, const std::string& group) {
  for (const auto* option : algorithms::all_algorithm_options())
    bind_declared(app, config, *option, option->brief)->group(group);
}

void apply_site_config_file(CLI::App& app, SiteConfig& config) {
  const CLI::Option* config_option = app.get_option_no_throw("--config");
  if (config_option == nullptr || config_option->count() == 0) return;
  const auto file = config_option->as<std::string>();
  std::vector<CLI::ConfigItem> items;
  try {
    items = CLI::ConfigTOML().from_file(file);
  } catch (const CLI::Error& e) {
    throw SiteConfigError("config file " + file + ": cannot be read: " + e.what());
  }
  const auto specs = option_specs();
  // Relative paths count from the file's folder unless given on the command line (which count from
  // the current directory): a service manager may start the daemon anywhere.
  const auto on_command_line = [&app](std::string_view name) {
    const CLI::Option* option = app.get_option_no_throw("--" + std::string(name));
    return option != nullptr && option->count() > 0;
  };
  std::vector<std::string> from_file;
  for (const auto& spec : specs)
    if (spec.path && !on_command_line(spec.name)) from_file.push_back(spec.name);
  for (const auto& item : items) {
    if (!item.parents.empty()) {
      // CLI11 reports a section as "++"/"--" markers and its keys with parents.
      if (item.name == "++") {
        throw SiteConfigError("config file " + file + ": section [" + item.parents.back() +
                              "] is not used: write every key at the top level (as 'meridian init' does)");
      }
      continue;
    }
    std::string key = item.name;
    std::replace(key.begin(), key.end(), '_', '-');
    CLI::Option* option = app.get_option_no_throw("--" + key);
    if (option == nullptr || key == "config") {
      throw SiteConfigError("config file " + file + ": unknown key '" + item.name +
                            "' (keys are the long flags of 'meridian start' without '--', e.g. checkpoint-dir; "
                            "see 'meridian init' for all of them)");
    }
    if (option->count() > 0) continue;  // given on the command line, which wins
    const bool empty_list = item.inputs.empty() || (item.inputs.size() == 1 && item.inputs[0].empty());
    const auto spec = std::find_if(specs.begin(), specs.end(), [&](const OptionSpec& s) { return s.name == key; });
    if (empty_list && spec != specs.end() && spec->clear) {
      spec->clear(config);
      continue;
    }
    try {
      if (option->get_expected_min() == 0) {
        option->add_result(option->get_flag_value(key, CLI::ConfigTOML().to_flag(item)));
      } else {
        option->add_result(item.inputs);
      }
      option->run_callback();
    } catch (const CLI::Error& e) {
      throw SiteConfigError("config file " + file + ": key '" + item.name + "': " + e.what());
    }
  }
  config = rebase_site_paths(
      std::move(config), std::filesystem::path(file).parent_path(), {},
      [&](std::string_view name) { return std::find(from_file.begin(), from_file.end(), name) != from_file.end(); });
}

SiteConfig rebase_site_paths(SiteConfig config, const std::filesystem::path& from, const std::filesystem::path& to,
                             const std::function<bool(std::string_view option)>& selected) {
  for (const auto& spec : option_specs())
    if (spec.path && (!selected || selected(spec.name))) config.*spec.path = rebase_path(config.*spec.path, from, to);
  return config;
}

void apply_algorithm_defaults(SiteConfig& config, const std::function<bool(std::string_view option)>& given) {
  if (const auto* algorithm = algorithms::find_algorithm(config.algo)) algorithm->apply_defaults(config, given);
}

void apply_algorithm_defaults(const CLI::App& app, SiteConfig& config) {
  apply_algorithm_defaults(config, [&](std::string_view name) {
    const CLI::Option* option = app.get_option_no_throw("--" + std::string(name));
    return option != nullptr && option->count() > 0;
  });
}

SiteConfig read_site_config_file(const std::string& path) {
  CLI::App app;
  SiteConfig config;
  bind_site_options(app, config);
  try {
    app.parse(std::vector<std::string>{path, "--config"});  // CLI11 takes the arguments in reverse
  } catch (const CLI::Error& e) {
    throw SiteConfigError("config file " + path + ": " + e.what());
  }
  apply_site_config_file(app, config);
  return config;
}

std::string render_site_config(const SiteConfig& config,
                               const std::function<std::optional<std::string>(std::string_view option)>& commented) {
  std::string out =
      "# Meridian site configuration (written by 'meridian init').\n"
      "# Start the site with:   meridian start --config THIS_FILE\n"
      "# Every key is also a flag of 'meridian start' (lr = 0.05 is --lr 0.05); a flag given on the\n"
      "# command line wins over this file.\n";
  std::string group;
  for (const auto& spec : option_specs()) {
    if (spec.group != group) {
      group = spec.group;
      out += "\n# --- " + group + " ---\n";
    }
    const auto note = commented ? commented(spec.name) : std::nullopt;
    out +=
        "\n# " + spec.help + "\n" + (note ? "# " + *note + "\n# " : "") + spec.name + " = " + spec.toml(config) + "\n";
  }
  return out;
}

}  // namespace meridian::daemon
