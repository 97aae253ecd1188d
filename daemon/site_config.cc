#include "daemon/site_config.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <functional>
#include <type_traits>
#include <utility>

#include "gossip/dts.h"
#include "gossip/tensor_codec.h"
#include "models/data/partition.h"
#include "models/device.h"
#include "peer/partition_schedule.h"
#include "peer/wan_model.h"

namespace meridian::daemon {
namespace {

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
  OptionSpec spec{std::move(group), name, help, nullptr, nullptr, nullptr};
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

const std::vector<OptionSpec>& option_specs() {
  static const std::vector<OptionSpec> specs = [] {
    using C = SiteConfig;
    const std::string id = "Identity and network", data = "Data", model = "Model and optimizer",
                      algo = "Algorithm", wan = "WAN emulation", ops = "Operations";
    return std::vector<OptionSpec>{
        field(id, "name", "Name of this site, unique in the federation (letters, digits, '.', '_', '-')", &C::name),
        field(id, "key-dir", "Directory with this site's CurveZMQ key pair (create it with 'meridian keygen')",
              &C::key_dir),
        field(id, "roster", "Roster file: the sites allowed in the federation, with their public keys", &C::roster),
        field(id, "listen", "Address to listen on, tcp://HOST:PORT (port 0: any free port, written to RUN_DIR/endpoint)", &C::listen),
        field(id, "advertise",
              "Address peers connect to, tcp://HOST:PORT (\"\" = the listen address; required with 0.0.0.0)",
              &C::advertise),
        field(id, "join", "Bootstrap peers to join through, [NAME@]tcp://HOST:PORT (repeat the flag or separate with ',')",
              &C::join),
        field(id, "insecure", "No encryption or authentication: local experiments only, never across sites",
              &C::insecure),
        field(id, "heartbeat-interval", "Seconds between the heartbeats this site sends to every live member",
              &C::heartbeat_interval),
        field(id, "heartbeat-timeout",
              "Seconds of silence after which a member is declared dead and left out of the next view; raise it "
              "on a heavily loaded machine or long, lossy links (several intervals plus the slowest round trip)",
              &C::heartbeat_timeout),
        field(id, "run-dir", "Directory for checkpoints and the control socket unless those are set", &C::run_dir),
        field(data, "dataset", "fashion-mnist | idx | csv", &C::dataset),
        field(data, "data-dir", "IDX files (train-images-idx3-ubyte[.gz], ...) for fashion-mnist and idx",
              &C::data_dir),
        field(data, "train-csv", "csv: training file with a header row and a label column", &C::train_csv),
        field(data, "test-csv", "csv: test file (optional; without it no test accuracy is reported)", &C::test_csv),
        field(data, "label-column", "csv: name or 0-based index of the label column", &C::label_column),
        field(data, "partition", "How simulations split one dataset: iid | dirichlet:ALPHA (e.g. dirichlet:0.5)",
              &C::partition),
        field(data, "site-index", "This site's part of a split dataset, 0..site-count-1", &C::site_index),
        field(data, "site-count", "Number of parts the dataset is split into (1 = use it all)", &C::site_count),
        field(model, "model", "logreg | mlp | cnn", &C::model),
        field(model, "widths", "Hidden layer widths of the mlp, e.g. 256,128 (logreg and the LeNet-style cnn have fixed layers)", &C::widths),
        field(model, "optimizer", "sgd | momentum | nesterov | adam", &C::optimizer),
        field(model, "lr", "Learning rate", &C::lr),
        field(model, "schedule", "Learning-rate schedule: constant | step:EPOCHS:FACTOR (e.g. step:2:0.5) | cosine",
              &C::schedule),
        field(model, "momentum", "Momentum coefficient m for momentum and nesterov, in [0, 1)", &C::momentum),
        field(model, "weight-decay", "L2 weight decay", &C::weight_decay),
        field(model, "batch", "Local batch size", &C::batch),
        field(model, "epochs", "Epochs over the site's part of the data (fractions allowed, e.g. 0.5)", &C::epochs),
        field(model, "eval-every", "Steps between test-set evaluations (0 = once per epoch)", &C::eval_every),
        field(algo, "algo", "allreduce | dts | sgp | dsync | local", &C::algo),
        field(algo, "delay",
              "D: steps a mixed result may arrive late (dts; delayed compensation for sgp, dsync). dts without "
              "--delay and --period runs D = 2, P = 16",
              &C::delay),
        field(algo, "period", "P: dts starts an average every P steps (see --delay for dts' default shape)",
              &C::period),
        field(algo, "out-peers", "K: sgp out-peers per step", &C::out_peers),
        field(algo, "tau", "tau: sgp may run this many steps ahead of the oldest message it expects", &C::tau),
        field(algo, "grid", "dsync: auto | AxB (rows x columns of sites)", &C::grid),
        field(algo, "min-sites", "Sites that must be in the view before training starts (0 = --site-count)",
              &C::min_sites),
        field(algo, "join-timeout", "Seconds to wait for --min-sites sites before giving up", &C::join_timeout),
        field(algo, "round-timeout", "Seconds after which a mixing round is abandoned and redone without the late sites",
              &C::round_timeout),
        field(algo, "reaverage-every", "Steps between exact parameter re-averages (0 = only on a view change)",
              &C::reaverage_every),
        field(algo, "compensation",
              "dts: exact | no-momentum (fix w only) | off (apply the average D steps late, no local step) | local "
              "(never average)",
              &C::compensation),
        field(algo, "compression",
              "Mixer messages: none | fp16 (dts, sgp) | topk:FRACTION (dts, with error feedback; e.g. topk:0.01)",
              &C::compression),
        field(algo, "exchange",
              "dts: how each average travels: ring (exact ring all-reduce, 2(n-1) link crossings in a row) | direct "
              "(every site sends to every other: one crossing, n-1 copies sent); compressed averages always go direct",
              &C::exchange),
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
        field(algo, "byzantine-scale",
              "Fault injection for experiments: > 0 makes this site send random garbage this many times the RMS "
              "of its honest vectors (0 = honest)",
              &C::byzantine_scale),
        field(wan, "wan",
              "Emulated links: \"\" (none) | world4 | latency=120ms,jitter=10ms,bandwidth=50mbit,loss=0.01",
              &C::wan),
        field(wan, "region", "With --wan world4: oregon | ohio | london | tokyo", &C::region),
        field(wan, "slowdown",
              "Emulated straggler: every step takes this many times as long as it would, not counting the time "
              "spent waiting for other sites (1 = as fast as it can)",
              &C::slowdown),
        field(wan, "wan-partition",
              "Emulated partitions, the same on every site: \"s0,s1|s2,s3@20s+10s\" cuts s0,s1 from s2,s3 "
              "from 20 s after start for 10 s (\"\" = none)",
              &C::wan_partition),
        field(wan, "wan-partition-origin",
              "Where the --wan-partition windows count from: start (this site's start), training (its first "
              "round: every site of a run starts training at the same round, so all cut together however "
              "long each took to start) or a Unix time in seconds, the same on every site",
              &C::wan_partition_origin),
        field(ops, "checkpoint-dir", "Checkpoint directory (\"\" = RUN_DIR/checkpoints)", &C::checkpoint_dir),
        field(ops, "checkpoint-interval", "Seconds between checkpoints", &C::checkpoint_interval),
        field(ops, "checkpoint-keep", "Checkpoints kept (the newest)", &C::checkpoint_keep),
        field(ops, "metrics-address", "Prometheus /metrics on HOST:PORT, or off", &C::metrics_address),
        field(ops, "control-socket", "Control socket for status/peers/leave (\"\" = RUN_DIR/control.sock)",
              &C::control_socket),
        field(ops, "device", "auto | cpu | cuda | cuda:N", &C::device),
        field(ops, "seed", "Random seed (initial model, data order)", &C::seed),
        field(ops, "threads", "Compute threads (0 = one per core)", &C::threads),
    };
  }();
  return specs;
}

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

}  // namespace

std::string SiteConfig::checkpoint_dir_or_default() const {
  return checkpoint_dir.empty() ? run_dir + "/checkpoints" : checkpoint_dir;
}

std::string SiteConfig::control_socket_or_default() const {
  return control_socket.empty() ? run_dir + "/control.sock" : control_socket;
}

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

std::optional<GridSpec> parse_grid(const std::string& text) {
  if (text == "auto") return GridSpec{};
  const auto x = text.find('x');
  if (x == std::string::npos) return std::nullopt;
  const auto rows = parse_number<int>(std::string_view(text).substr(0, x));
  const auto cols = parse_number<int>(std::string_view(text).substr(x + 1));
  if (!rows || !cols || *rows < 1 || *cols < 1) return std::nullopt;
  return GridSpec{*rows, *cols};
}

void bind_site_options(CLI::App& app, SiteConfig& config) {
  app.add_option("--config", "Read options from FILE (TOML, as written by 'meridian init'); "
                             "flags on the command line win over the file")
      ->type_name("FILE")
      ->check(CLI::Validator(CLI::ExistingFile).description(""));  // no ":FILE" after the type in --help
  for (const auto& spec : option_specs()) spec.bind(app, config)->group(spec.group);
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
    const auto spec = std::find_if(option_specs().begin(), option_specs().end(),
                                   [&](const OptionSpec& s) { return s.name == key; });
    if (empty_list && spec != option_specs().end() && spec->clear) {
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
}

void apply_dts_shape_default(SiteConfig& config, bool delay_given, bool period_given) {
  if (config.algo != "dts" || delay_given || period_given) return;
  config.delay = kDtsDefaultDelay;
  config.period = kDtsDefaultPeriod;
}

void apply_dts_shape_default(const CLI::App& app, SiteConfig& config) {
  const auto given = [&](const char* name) {
    const CLI::Option* option = app.get_option_no_throw(name);
    return option != nullptr && option->count() > 0;
  };
  apply_dts_shape_default(config, given("--delay"), given("--period"));
}

std::string describe_algorithm(const SiteConfig& c) {
  const std::string d = std::to_string(c.delay);
  std::string out = c.algo;
  if (c.algo == "dts") {
    out += ", D = " + d + ", P = " + std::to_string(c.period);
    if (c.delay == kDtsDefaultDelay && c.period == kDtsDefaultPeriod) out += " (dts' default shape)";
    if (c.delay == 0 && c.period == 1) out += " (waits for every average, as allreduce does)";
    out += ", exchange " + c.exchange + ", compensation " + c.compensation;
  } else if (c.algo == "sgp") {
    out += ", K = " + std::to_string(c.out_peers) + " out-peer(s), tau = " + std::to_string(c.tau);
  } else if (c.algo == "dsync") {
    out += ", grid " + c.grid + ", D = " + d;
  }
  if (c.algo != "allreduce" && c.algo != "local" && c.compression != "none") out += ", compression " + c.compression;
  if (c.robust_aggregation) out += ", robust aggregation";
  return out;
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

std::vector<std::string> site_config_problems(const SiteConfig& c) {
  std::vector<std::string> problems;
  auto problem = [&](const std::string& option, const std::string& text) {
    problems.push_back("--" + option + ": " + text);
  };
  auto one_of = [&](const std::string& option, const std::string& value, std::initializer_list<const char*> allowed) {
    if (!is_one_of(value, allowed)) problem(option, "'" + value + "' is not one of " + join_list(allowed));
  };
  auto at_least = [&](const std::string& option, long long value, long long min) {
    if (value < min) problem(option, std::to_string(value) + " is below the minimum " + std::to_string(min));
  };

  if (!is_site_name(c.name)) {
    problem("name", c.name.empty() ? "missing (give the site a name, e.g. --name oregon)"
                                   : "'" + c.name + "' must be 1-64 letters, digits, '.', '_' or '-'");
  }
  if (!c.insecure) {
    if (c.key_dir.empty()) problem("key-dir", "missing (create keys with 'meridian keygen', or use --insecure locally)");
    if (c.roster.empty()) problem("roster", "missing (list the federation's sites and keys, or use --insecure locally)");
  }
  if (!is_tcp_address(c.listen, 0)) problem("listen", "'" + c.listen + "' is not tcp://HOST:PORT (e.g. tcp://0.0.0.0:7400)");
  if (!c.advertise.empty() && !is_tcp_address(c.advertise, 1)) {
    problem("advertise", "'" + c.advertise + "' is not tcp://HOST:PORT (e.g. tcp://site.example.org:7400)");
  }
  for (const auto& peer : c.join) {
    // NAME@tcp://HOST:PORT names the site behind the address (needed with a roster that lists no address).
    const auto at = peer.find('@');
    const bool named = at != std::string::npos && at > 0 && is_site_name(peer.substr(0, at));
    if (!is_tcp_address(named ? peer.substr(at + 1) : peer, 1)) problem("join", "'" + peer + "' is not [NAME@]tcp://HOST:PORT (e.g. tcp://10.0.0.2:7400)");
  }
  // Membership counts in whole milliseconds; the upper bounds keep the conversion far from overflow, and
  // the interval's leaves room for a timeout of six intervals, which the hint below suggests.
  constexpr double kMaxHeartbeatSeconds = 86400;
  constexpr double kMaxHeartbeatIntervalSeconds = 3600;
  auto heartbeat_seconds_ok = [&](const std::string& option, double seconds, double most, const char* example) {
    if (std::isfinite(seconds) && seconds >= 0.001 && seconds <= most) return true;
    problem(option, "must be a number of seconds from 0.001 to " + seconds_text(most) + " (e.g. " + example + ")");
    return false;
  };
  const bool interval_ok =
      heartbeat_seconds_ok("heartbeat-interval", c.heartbeat_interval, kMaxHeartbeatIntervalSeconds, "0.5");
  const bool timeout_ok = heartbeat_seconds_ok("heartbeat-timeout", c.heartbeat_timeout, kMaxHeartbeatSeconds, "3");
  if (interval_ok && timeout_ok &&
      heartbeat_milliseconds(c.heartbeat_timeout) <= heartbeat_milliseconds(c.heartbeat_interval)) {
    // One late heartbeat must not kill a member: the timeout has to span several of them.
    const char* margin = c.heartbeat_timeout > c.heartbeat_interval ? " (by a whole millisecond at least)" : "";
    problem("heartbeat-timeout", seconds_text(c.heartbeat_timeout) + " s must exceed --heartbeat-interval " +
                                     seconds_text(c.heartbeat_interval) + " s" + margin +
                                     ": make it several intervals plus the round trip of the slowest link (e.g. " +
                                     seconds_text(6 * c.heartbeat_interval) + ")");
  }
  if (c.run_dir.empty()) problem("run-dir", "must not be empty (e.g. --run-dir /var/lib/meridian)");

  one_of("dataset", c.dataset, {"fashion-mnist", "idx", "csv"});
  if ((c.dataset == "idx" || c.dataset == "fashion-mnist") && c.data_dir.empty()) {
    problem("data-dir", "missing: the directory with the IDX files");
  }
  if (c.dataset == "csv" && c.train_csv.empty()) problem("train-csv", "missing: --dataset csv needs a training file");
  if (c.label_column.empty()) problem("label-column", "must not be empty (a column name or 0-based index)");
  try {
    models::data::parse_partition_spec(c.partition);
  } catch (const std::invalid_argument& e) {
    problem("partition", e.what());
  }
  at_least("site-count", c.site_count, 1);
  if (c.site_index < 0 || c.site_index >= std::max(c.site_count, 1)) {
    problem("site-index", std::to_string(c.site_index) + " is outside 0.." + std::to_string(std::max(c.site_count, 1) - 1) +
                              " (it must be below --site-count)");
  }

  one_of("model", c.model, {"logreg", "mlp", "cnn"});
  if (c.model == "mlp" && c.widths.empty()) problem("widths", "missing: the mlp needs hidden layer widths (e.g. 256,128)");
  for (int w : c.widths) {
    if (w < 1) problem("widths", std::to_string(w) + " is not a positive width");
  }
  one_of("optimizer", c.optimizer, {"sgd", "momentum", "nesterov", "adam"});
  if (!(std::isfinite(c.lr) && c.lr > 0)) problem("lr", "must be a positive number (e.g. 0.05)");
  if (!parse_schedule(c.schedule)) {
    problem("schedule", "'" + c.schedule + "' is not constant, cosine or step:EPOCHS:FACTOR (e.g. step:2:0.5)");
  }
  if (!(c.momentum >= 0 && c.momentum < 1)) problem("momentum", "must be in [0, 1) (e.g. 0.9)");
  if (!(std::isfinite(c.weight_decay) && c.weight_decay >= 0)) problem("weight-decay", "must be 0 or positive");
  at_least("batch", c.batch, 1);
  if (!(std::isfinite(c.epochs) && c.epochs > 0)) problem("epochs", "must be a positive number (e.g. 3 or 0.5)");
  at_least("eval-every", c.eval_every, 0);

  one_of("algo", c.algo, {"allreduce", "dts", "sgp", "dsync", "local"});
  at_least("delay", c.delay, 0);
  at_least("period", c.period, 1);
  at_least("out-peers", c.out_peers, 1);
  at_least("tau", c.tau, 1);
  if (!parse_grid(c.grid)) problem("grid", "'" + c.grid + "' is not auto or ROWSxCOLS (e.g. 2x4)");
  at_least("reaverage-every", c.reaverage_every, 0);
  if (!gossip::parse_dts_compensation(c.compensation)) {
    problem("compensation", "'" + c.compensation + "' is not exact, no-momentum, off or local");
  } else if (c.compensation != "exact" && c.algo != "dts") {
    problem("compensation", "applies to dts only (this site runs " + c.algo + ")");
  }
  if (const auto spec = gossip::parse_compression(c.compression); !spec) {
    problem("compression", "'" + c.compression + "' is not none, fp16 or topk:FRACTION with FRACTION in (0, 0.5] (e.g. topk:0.01)");
  } else if (spec->encoding == gossip::Encoding::kTopK && c.algo != "dts") {
    problem("compression", "top-k with error feedback applies to dts only (its averages are of gradients; " + c.algo +
                               " mixes parameters, whose top-k would zero the rest); use fp16 or none");
  } else if (spec->encoding == gossip::Encoding::kFp16 && c.algo != "dts" && c.algo != "sgp") {
    problem("compression", "fp16 applies to dts and sgp only (" + c.algo +
                               " keeps its exact ring all-reduce); use none");
  }
  if (c.exchange != "ring" && c.exchange != "direct") {
    problem("exchange", "'" + c.exchange + "' is not ring or direct");
  } else if (c.exchange == "direct" && c.algo != "dts") {
    problem("exchange", "applies to dts only (this site runs " + c.algo + ")");
  }
  at_least("robust-trim", c.robust_trim, 0);
  if (!(std::isfinite(c.robust_clip) && c.robust_clip >= 0)) problem("robust-clip", "must be 0 (off) or positive");
  if (!(std::isfinite(c.byzantine_scale) && c.byzantine_scale >= 0))
    problem("byzantine-scale", "must be 0 (an honest site) or positive");
  at_least("min-sites", c.min_sites, 0);
  if (!(std::isfinite(c.join_timeout) && c.join_timeout > 0)) problem("join-timeout", "must be a positive number of seconds");
  if (!(std::isfinite(c.round_timeout) && c.round_timeout > 0)) problem("round-timeout", "must be a positive number of seconds");

  // peer/ owns the --wan grammar; a model with regions needs to know which one this site is in.
  try {
    const auto wan = peer::parse_wan_spec(c.wan);
    if (wan.regions() > 1) {
      if (!wan.region_index(c.region)) {
        std::string names;
        for (std::size_t r = 0; r < wan.regions(); ++r) names += (r ? ", " : "") + wan.region_name(r);
        problem("region", (c.region.empty() ? std::string("missing: name this site's region in")
                                            : "'" + c.region + "' is not a region of") +
                              " --wan " + c.wan + " (regions: " + names + ")");
      }
    } else if (!c.region.empty()) {
      problem("region", "only applies with a --wan that has regions, such as world4");
    }
  } catch (const std::invalid_argument& e) {
    problem("wan", e.what());
  }
  if (!(std::isfinite(c.slowdown) && c.slowdown >= 1 && c.slowdown <= 1000))
    problem("slowdown", "must be a factor from 1 (off) to 1000, e.g. 5 for a site five times slower");
  try {
    (void)peer::parse_partition_schedule(c.wan_partition);
  } catch (const std::invalid_argument& e) {
    problem("wan-partition", e.what());
  }
  if (c.wan_partition_origin != "start" && c.wan_partition_origin != "training" &&
      !partition_origin_unix_seconds(c.wan_partition_origin))
    problem("wan-partition-origin", "must be start, training or a Unix time in seconds (e.g. from `date +%s`), not \"" +
                                        c.wan_partition_origin + "\"");

  if (!(std::isfinite(c.checkpoint_interval) && c.checkpoint_interval > 0)) {
    problem("checkpoint-interval", "must be a positive number of seconds (e.g. 60)");
  }
  at_least("checkpoint-keep", c.checkpoint_keep, 1);
  if (c.metrics_address != "off") {
    const auto colon = c.metrics_address.rfind(':');
    const auto port = colon == std::string::npos ? std::nullopt
                                                 : parse_number<int>(std::string_view(c.metrics_address).substr(colon + 1));
    if (colon == std::string::npos || colon == 0 || !port || *port < 0 || *port > 65535) {
      problem("metrics-address", "'" + c.metrics_address + "' is not HOST:PORT or off (e.g. 127.0.0.1:9400)");
    }
  }
  // A Unix socket address holds at most 107 bytes of path.
  if (c.control_socket_or_default().size() > 107) {
    problem("control-socket", "path '" + c.control_socket_or_default() +
                                  "' is longer than a Unix socket allows (107 bytes); choose a shorter one");
  }
  // The grammar lives in models/device.h (the trainer resolves the same text); only the wording is ours.
  try {
    models::parse_device(c.device);
  } catch (const models::DeviceError&) {
    problem("device", "'" + c.device + "' is not auto, cpu, cuda or cuda:N");
  }
  at_least("threads", c.threads, 0);
  return problems;
}

void validate_site_config(const SiteConfig& config) {
  const auto problems = site_config_problems(config);
  if (problems.empty()) return;
  std::string text = "invalid site configuration:";
  for (const auto& p : problems) text += "\n  " + p;
  throw SiteConfigError(text);
}

std::string render_site_config(const SiteConfig& config) {
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
    out += "\n# " + spec.help + "\n" + spec.name + " = " + spec.toml(config) + "\n";
  }
  return out;
}

}  // namespace meridian::daemon
