#include <catch2/catch.hpp>

#include <CLI/CLI.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <tuple>

#include "daemon/algorithms/dts.h"
#include "daemon/algorithms/registry.h"
#include "daemon/site_config.h"
#include "error/exit_code.h"
#include "peer/curve_keys.h"
#include "tests/support/build_paths.h"
#include "tests/support/child_process.h"
#include "tests/support/file_contents.h"
#include "tests/support/meridian_command.h"
#include "tests/support/small_table.h"
#include "tests/support/temp_dir.h"

using namespace meridian::daemon;
using Catch::Matchers::Contains;
using meridian::tests::TempDir;

namespace {

// Parses `args` the way `meridian start` does: flags, then the --config file for what flags left unset,
// then dts' default shape.
SiteConfig parse(std::vector<std::string> args) {
  CLI::App app{"test"};
  SiteConfig config;
  bind_site_options(app, config);
  std::reverse(args.begin(), args.end());  // CLI11 takes a vector in reverse order
  app.parse(args);
  apply_site_config_file(app, config);
  apply_algorithm_defaults(app, config);
  return config;
}

std::string problems_of(const SiteConfig& config) {
  std::string all;
  for (const auto& p : site_config_problems(config)) all += p + "\n";
  return all;
}

// The exit code of a shell command.
int run(const std::string& command) { return meridian::tests::run_shell(command).exit_code; }

}  // namespace

TEST_CASE("meridian init writes a config that --config reads back to the same values", "[daemon][config][process]") {
  TempDir tmp;
  const auto file = tmp.path() / "oregon.toml";
  const std::string init =
      std::string(meridian::tests::meridian_binary()) + " init --name oregon --out " + file.string();
  REQUIRE(run(init + " > /dev/null") == 0);

  SiteConfig expected;
  expected.name = "oregon";
  // The default relative paths live next to the file.
  expected.key_dir = (tmp.path() / "keys").string();
  expected.roster = (tmp.path() / "roster.txt").string();
  expected.run_dir = (tmp.path() / "meridian-run").string();
  const auto read_back = parse({"--config", file.string()});
  CHECK(read_back == expected);
  validate_site_config(read_back);

  // It refuses to overwrite without --force.
  CHECK(run(init + " 2> /dev/null") == meridian::error::kExitUser);
}

TEST_CASE("every kind of value survives init and --config", "[daemon][config][process]") {
  TempDir tmp;
  const auto file = tmp.path() / "tokyo.toml";
  REQUIRE(run(std::string(meridian::tests::meridian_binary()) + " init --out " + file.string() +
              " --name tokyo --insecure --join tcp://10.0.0.1:7400,tcp://10.0.0.2:7401 --widths 512,64,32"
              " --lr 0.125 --weight-decay 5e-4 --algo dts --delay 3 --period 2 --wan world4 --region tokyo"
              " --seed 18446744073709551615 --metrics-address off --checkpoint-dir '/var/lib/it is \"here\"'"
              " --partition dirichlet:0.5 --site-index 2 --site-count 4"
              " --heartbeat-interval 0.25 --heartbeat-timeout 12.5 > /dev/null") == 0);
  const auto config = parse({"--config", file.string()});
  CHECK(config.name == "tokyo");
  CHECK(config.insecure);
  CHECK(config.join == std::vector<std::string>{"tcp://10.0.0.1:7400", "tcp://10.0.0.2:7401"});
  CHECK(config.widths == std::vector<int>{512, 64, 32});
  CHECK(config.lr == 0.125);
  CHECK(config.weight_decay == 5e-4);
  CHECK(config.algo == "dts");
  CHECK(config.delay == 3);
  CHECK(config.period == 2);
  CHECK(config.wan == "world4");
  CHECK(config.region == "tokyo");
  CHECK(config.seed == 18446744073709551615ull);
  CHECK(config.metrics_address == "off");
  CHECK(config.checkpoint_dir == "/var/lib/it is \"here\"");
  CHECK(config.site_index == 2);
  CHECK(config.heartbeat_interval == 0.25);
  CHECK(config.heartbeat_timeout == 12.5);
  CHECK(problems_of(config).empty());

  // A flag on the command line wins over the file; the rest still comes from the file.
  const auto overridden = parse({"--config", file.string(), "--lr", "0.5", "--join", "tcp://h:1"});
  CHECK(overridden.lr == 0.5);
  CHECK(overridden.join == std::vector<std::string>{"tcp://h:1"});
  CHECK(overridden.delay == 3);
}

TEST_CASE("relative paths in a config file count from its folder, those on the command line from the current one",
          "[daemon][config][unit]") {
  TempDir tmp;
  const auto folder = tmp.path() / "sites" / "alpha";
  std::filesystem::create_directories(folder);
  const auto file = folder / "site.toml";
  std::ofstream(file) << "name = \"alpha\"\n"
                         "key-dir = \"keys\"\n"
                         "roster = \"../roster.txt\"\n"
                         "train = \"data/features.npy,data/labels.npy\"\n"
                         "checkpoint-dir = \"/var/lib/meridian/checkpoints\"\n"
                         "train-csv = \"\"\n";
  const auto config = parse({"--config", file.string(), "--run-dir", "runs/alpha"});
  CHECK(config.key_dir == (folder / "keys").string());
  CHECK(config.roster == (tmp.path() / "sites" / "roster.txt").string());
  // A FEATURES,LABELS pair is two paths.
  CHECK(config.train == (folder / "data/features.npy").string() + "," + (folder / "data/labels.npy").string());
  CHECK(config.checkpoint_dir == "/var/lib/meridian/checkpoints");  // absolute: as written
  CHECK(config.train_csv.empty());                                  // empty: not a path
  CHECK(config.run_dir == "runs/alpha");                            // the command line's: from here
  CHECK(config.control_socket.empty());                             // unset: RUN_DIR/control.sock
  CHECK(config.data_dir == SiteConfig{}.data_dir);                  // an absolute default stays
}

TEST_CASE("meridian init writes paths given to it so that the file names the same files from its folder",
          "[daemon][config][process]") {
  TempDir tmp;
  std::filesystem::create_directories(tmp.path() / "conf");
  // Data paths are checked when the file is written, as start checks them.
  meridian::tests::write_small_table(tmp.path() / "data", "train.csv", {"dog", "cat"});
  const auto written =
      meridian::tests::run_shell("cd " + tmp.path().string() + " && " + meridian::tests::meridian_binary() +
                                 " init --name alpha --key-dir secrets/alpha --train-csv "
                                 "data/train.csv --out conf/alpha.toml");
  INFO(written.output);
  REQUIRE(written.exit_code == 0);
  const auto text = meridian::tests::file_contents(tmp.path() / "conf" / "alpha.toml");
  CHECK_THAT(text, Contains("key-dir = \"../secrets/alpha\"") && Contains("train-csv = \"../data/train.csv\"") &&
                       Contains("roster = \"roster.txt\""));
  // The hint names the files from where init ran.
  CHECK_THAT(written.output, Contains("meridian keygen --out secrets/alpha") && Contains("conf/roster.txt"));
  // Read from anywhere, the file names the files init was given.
  const auto config = parse({"--config", (tmp.path() / "conf" / "alpha.toml").string()});
  CHECK(config.key_dir == (tmp.path() / "secrets/alpha").string());
  CHECK(config.train_csv == (tmp.path() / "data/train.csv").string());
  CHECK(config.roster == (tmp.path() / "conf/roster.txt").string());
}

TEST_CASE("dts without --delay and --period runs D = 2, P = 16; either one given keeps the user's shape",
          "[daemon][config][process]") {
  const auto shape = [](const SiteConfig& c) { return std::pair{c.delay, c.period}; };
  CHECK(shape(parse({"--algo", "dts"})) == std::pair{algorithms::kDtsDefaultDelay, algorithms::kDtsDefaultPeriod});
  CHECK(shape(parse({"--algo", "dts"})) == std::pair{2, 16});
  CHECK(shape(parse({"--algo", "dts", "--delay", "0"})) == std::pair{0, 1});
  CHECK(shape(parse({"--algo", "dts", "--period", "4"})) == std::pair{0, 4});
  CHECK(shape(parse({"--algo", "sgp"})) == std::pair{0, 1});  // the fields' own defaults elsewhere

  // A value in the config file counts as given, like one on the command line.
  TempDir tmp;
  const auto file = tmp.path() / "site.toml";
  std::ofstream(file) << "algo = \"dts\"\nperiod = 1\n";
  CHECK(shape(parse({"--config", file.string()})) == std::pair{0, 1});
  std::ofstream(file) << "algo = \"dts\"\n";
  CHECK(shape(parse({"--config", file.string()})) == std::pair{2, 16});

  // meridian init shows the shape in the file it makes, as a comment, so the file says what the site will
  // run and still leaves the shape to the algorithm; a shape given to init is written as a key.
  const auto made = tmp.path() / "made.toml";
  REQUIRE(run(std::string(meridian::tests::meridian_binary()) + " init --name a --algo dts --out " + made.string() +
              " > /dev/null") == 0);
  const std::string text = meridian::tests::file_contents(made);
  CHECK_THAT(text, Catch::Contains("\n# delay = 2\n") && Catch::Contains("\n# period = 16\n"));
  CHECK(shape(parse({"--config", made.string()})) == std::pair{2, 16});
  REQUIRE(run(std::string(meridian::tests::meridian_binary()) + " init --name a --algo dts --period 4 --force --out " +
              made.string() + " > /dev/null") == 0);
  CHECK_THAT(meridian::tests::file_contents(made), Catch::Contains("\nperiod = 4\n"));
  CHECK(shape(parse({"--config", made.string()})) == std::pair{0, 4});
}

TEST_CASE("switching algo in a file meridian init wrote gives the new algorithm its own defaults",
          "[daemon][config][process]") {
  TempDir tmp;
  // The knobs an algorithm reads, as the start-up log line names them, and the knob fields themselves.
  const auto knobs = [](const SiteConfig& c) {
    return std::tuple{describe_algorithm(settings_of(c)),
                      c.delay,
                      c.period,
                      c.out_peers,
                      c.tau,
                      c.grid,
                      c.exchange,
                      c.compression,
                      c.compensation,
                      c.reaverage_every,
                      c.algorithm_options};
  };
  const auto names = algorithms::algorithm_names(" ");
  std::vector<std::string> all;
  for (std::size_t at = 0, space = 0; at < names.size(); at = space + 1) {
    space = std::min(names.find(' ', at), names.size());
    all.push_back(names.substr(at, space - at));
  }
  REQUIRE(all.size() >= 7);
  for (const auto& written_for : all) {
    const auto file = tmp.path() / (written_for + ".toml");
    const auto init = meridian::tests::run_meridian("init --name a --algo " + written_for + " --out " + file.string());
    INFO(init.output);
    REQUIRE(init.exit_code == 0);
    const std::string text = meridian::tests::file_contents(file);
    const auto algo_line = "\nalgo = \"" + written_for + "\"\n";
    REQUIRE(text.find(algo_line) != std::string::npos);
    for (const auto& switched_to : all) {
      INFO("written for " << written_for << ", switched to " << switched_to);
      std::string edited = text;
      edited.replace(edited.find(algo_line), algo_line.size(), "\nalgo = \"" + switched_to + "\"\n");
      const auto switched = tmp.path() / "switched.toml";
      std::ofstream(switched, std::ios::trunc) << edited;
      CHECK(knobs(parse({"--config", switched.string()})) == knobs(parse({"--name", "a", "--algo", switched_to})));
    }
  }
  // What the file says about a knob the algorithm leaves out or picks itself.
  const std::string sgp = meridian::tests::file_contents(tmp.path() / "sgp.toml");
  CHECK_THAT(sgp, Contains("# not read by sgp (read by dts, dsync)\n# delay = 0\n") &&
                      Contains("# left to sgp, which runs this value; write the key to set it\n# tau = 1\n"));
}

TEST_CASE("the start-up log names the algorithm with the knobs it reads", "[daemon][config][unit]") {
  const auto describe = [](std::vector<std::string> args) {
    args.insert(args.end(), {"--name", "a"});
    return describe_algorithm(settings_of(parse(args)));
  };
  CHECK(describe({"--algo", "dts"}) == "dts, D = 2, P = 16 (dts' default shape), exchange ring, compensation exact");
  CHECK_THAT(describe({"--algo", "dts", "--delay", "0"}), Catch::Contains("D = 0, P = 1 (waits for every average"));
  CHECK(describe({"--algo", "sgp", "--tau", "4", "--compression", "fp16"}) ==
        "sgp, K = 1 out-peer(s), tau = 4, compression fp16");
  CHECK(describe({"--algo", "dsync", "--robust-aggregation"}) == "dsync, grid auto, D = 0, robust aggregation");
  CHECK(describe({"--algo", "allreduce"}) == "allreduce");
}

TEST_CASE("a bad config file names the file and the key", "[daemon][config][unit]") {
  TempDir tmp;
  const auto file = tmp.path() / "bad.toml";
  auto error_for = [&](const std::string& text) {
    std::ofstream(file) << text;
    try {
      parse({"--config", file.string()});
    } catch (const SiteConfigError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  CHECK_THAT(error_for("name = \"x\"\nlearning-rate = 0.1\n"),
             Contains(file.string()) && Contains("unknown key 'learning-rate'"));
  CHECK_THAT(error_for("lr = \"fast\"\n"), Contains(file.string()) && Contains("key 'lr'"));
  CHECK_THAT(error_for("[start]\nlr = 0.1\n"), Contains("section [start] is not used"));
  // Underscores are accepted for dashes, as people write TOML keys both ways.
  std::ofstream(file) << "checkpoint_keep = 7\n";
  CHECK(parse({"--config", file.string()}).checkpoint_keep == 7);
  // An empty list in the file empties the option (validation then says what is missing).
  std::ofstream(file) << "widths = []\n";
  const auto no_widths = parse({"--config", file.string()});
  CHECK(no_widths.widths.empty());
  CHECK_THAT(problems_of(no_widths), Contains("--widths: missing"));
  CHECK_THROWS_AS(parse({"--config", (tmp.path() / "absent.toml").string()}), CLI::ValidationError);
}

TEST_CASE("each bad value gives an error naming the option with a hint", "[daemon][config][unit]") {
  SiteConfig good;
  good.name = "oregon";
  REQUIRE(problems_of(good).empty());

  struct Case {
    std::function<void(SiteConfig&)> change;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {[](SiteConfig& c) { c.name = ""; }, "--name: missing (give the site a name"},
      {[](SiteConfig& c) { c.name = "bad name!"; }, "--name: 'bad name!' must be"},
      {[](SiteConfig& c) { c.roster = ""; }, "--roster: missing"},
      {[](SiteConfig& c) { c.key_dir = ""; }, "--key-dir: missing (create keys with 'meridian keygen'"},
      {[](SiteConfig& c) { c.listen = "0.0.0.0:7400"; }, "--listen: '0.0.0.0:7400' is not tcp://HOST:PORT"},
      {[](SiteConfig& c) { c.join = {"tcp://host"}; }, "--join: 'tcp://host' is not [NAME@]tcp://HOST:PORT"},
      {[](SiteConfig& c) { c.join = {"tcp://host:0"}; }, "--join: 'tcp://host:0'"},
      {[](SiteConfig& c) { c.heartbeat_interval = 0; },
       "--heartbeat-interval: must be a number of seconds from 0.001 to 3600 (e.g. 0.5)"},
      {[](SiteConfig& c) { c.heartbeat_interval = 3601; },
       "--heartbeat-interval: must be a number of seconds from 0.001 to 3600 (e.g. 0.5)"},
      {[](SiteConfig& c) { c.heartbeat_interval = -1; }, "--heartbeat-interval: must be a number of seconds"},
      {[](SiteConfig& c) { c.heartbeat_timeout = std::nan(""); },
       "--heartbeat-timeout: must be a number of seconds from 0.001 to 86400 (e.g. 3)"},
      {[](SiteConfig& c) { c.heartbeat_timeout = std::numeric_limits<double>::infinity(); },
       "--heartbeat-timeout: must be a number of seconds"},
      {[](SiteConfig& c) { c.heartbeat_timeout = 0.0004; }, "--heartbeat-timeout: must be a number of seconds"},
      {[](SiteConfig& c) { c.heartbeat_timeout = 0.5; },
       "--heartbeat-timeout: 0.5 s must exceed --heartbeat-interval 0.5 s: make it several intervals plus the round "
       "trip "
       "of the slowest link (e.g. 3)"},
      {[](SiteConfig& c) {
         c.heartbeat_interval = 10;
         c.heartbeat_timeout = 4;
       },
       "--heartbeat-timeout: 4 s must exceed --heartbeat-interval 10 s"},
      // Membership counts whole milliseconds: these two are the same interval there.
      {[](SiteConfig& c) {
         c.heartbeat_interval = 0.0011;
         c.heartbeat_timeout = 0.0012;
       },
       "--heartbeat-timeout: 0.0012 s must exceed --heartbeat-interval 0.0011 s (by a whole millisecond at least)"},
      {[](SiteConfig& c) { c.dataset = "cifar"; }, "--dataset: 'cifar' is not one of fashion-mnist, idx, csv"},
      {[](SiteConfig& c) { c.dataset = "csv"; }, "--train: missing: --dataset csv needs a training file"},
      {[](SiteConfig& c) {
         c.dataset = "idx";
         c.train = "t.csv";
       },
       "--train: replaces --dataset idx"},
      {[](SiteConfig& c) { c.categorical = "ward=a||b"; }, "--categorical: --categorical 'ward=a||b'"},
      {[](SiteConfig& c) { c.ignore_columns = "id,id"; }, "--ignore-columns: --ignore-columns 'id,id'"},
      {[](SiteConfig& c) { c.partition = "dirichlet:0"; }, "--partition: partition \"dirichlet:0\": alpha"},
      {[](SiteConfig& c) { c.partition = "dirichlet:x"; }, "--partition: partition \"dirichlet:x\""},
      {[](SiteConfig& c) {
         c.site_index = 4;
         c.site_count = 4;
       },
       "--site-index: 4 is outside 0..3"},
      {[](SiteConfig& c) { c.compensation = "on"; }, "--compensation: 'on' is not exact, no-momentum, off or local"},
      {[](SiteConfig& c) {
         c.algo = "sgp";
         c.compensation = "off";
       },
       "--compensation: applies to dts only"},
      {[](SiteConfig& c) { c.exchange = "mesh"; }, "--exchange: 'mesh' is not ring, direct or auto"},
      {[](SiteConfig& c) {
         c.algo = "dsync";
         c.exchange = "direct";
       },
       "--exchange: applies to dts and diloco only"},
      {[](SiteConfig& c) { c.compression = "zip"; }, "--compression: 'zip' is not none, fp16, int8 or topk:FRACTION"},
      {[](SiteConfig& c) {
         c.algo = "sgp";
         c.compression = "topk:0.01";
       },
       "--compression: top-k with error feedback applies to dts only"},
      {[](SiteConfig& c) {
         c.algo = "allreduce";
         c.compression = "fp16";
       },
       "--compression: fp16 applies to dts, sgp, diloco and diloco-gossip only"},
      {[](SiteConfig& c) { c.robust_clip = -1; }, "--robust-clip: must be 0 (off) or positive"},
      {[](SiteConfig& c) { c.robust_trim = -1; }, "--robust-trim:"},
      {[](SiteConfig& c) { c.byzantine_scale = -2; }, "--byzantine-scale: must be 0 (an honest site) or positive"},
      {[](SiteConfig& c) { c.dp_epsilon = -1; }, "--dp-epsilon: must be 0 (no DP-SGD) or positive"},
      {[](SiteConfig& c) { c.dp_epsilon = 3; }, "--dp-clip: missing: DP-SGD clips each example's gradient"},
      {[](SiteConfig& c) {
         c.dp_noise_multiplier = 1;
         c.dp_clip = 1;
         c.dp_delta = 0;
       },
       "--dp-delta: must lie between 0 and 1"},
      {[](SiteConfig& c) { c.dp_clip = 1; }, "--dp-clip: applies with DP-SGD only"},
      {[](SiteConfig& c) {
         c.dp_epsilon = 3;
         c.dp_clip = 1;
         c.device = "cuda";
       },
       "--device: DP-SGD's per-example clipping runs on the CPU backend only"},
      {[](SiteConfig& c) {
         c.dp_epsilon = 3;
         c.dp_clip = 1;
         c.trainer = "attached";
       },
       "--trainer: attached trainers compute their own gradients"},
      {[](SiteConfig& c) { c.model = "resnet"; },
       "--model: 'resnet' is not one of logreg, mlp, mlp-bn, cnn, resnet8, resnet20, nor a model file"},
      {[](SiteConfig& c) { c.widths = {}; }, "--widths: missing: the mlp needs hidden layer widths"},
      {[](SiteConfig& c) {
         c.widths = {64, 0};
       },
       "--widths: 0 is not a positive width"},
      {[](SiteConfig& c) { c.optimizer = "lbfgs"; }, "--optimizer: 'lbfgs' is not one of"},
      {[](SiteConfig& c) { c.lr = 0; }, "--lr: must be a positive number"},
      {[](SiteConfig& c) { c.lr = std::nan(""); }, "--lr: must be a positive number"},
      {[](SiteConfig& c) { c.schedule = "step:2"; },
       "--schedule: 'step:2' is not constant, cosine or step:EPOCHS:FACTOR"},
      {[](SiteConfig& c) { c.momentum = 1; }, "--momentum: must be in [0, 1)"},
      {[](SiteConfig& c) { c.weight_decay = -1; }, "--weight-decay: must be 0 or positive"},
      {[](SiteConfig& c) { c.batch = 0; }, "--batch: 0 is below the minimum 1"},
      {[](SiteConfig& c) { c.epochs = -2; }, "--epochs: must be a positive number (e.g. 3 or 0.5)"},
      {[](SiteConfig& c) { c.algo = "fedavg"; },
       "--algo: 'fedavg' is not one of allreduce, dts, sgp, dsync, local, diloco, diloco-gossip"},
      {[](SiteConfig& c) { c.delay = -2; }, "--delay: -2 is below the minimum 0"},
      {[](SiteConfig& c) { c.period = 0; }, "--period: 0 is below the minimum 1"},
      {[](SiteConfig& c) { c.out_peers = 0; }, "--out-peers: 0"},
      {[](SiteConfig& c) { c.tau = 0; }, "--tau: 0"},
      {[](SiteConfig& c) { c.grid = "2by4"; }, "--grid: '2by4' is not auto or ROWSxCOLS"},
      {[](SiteConfig& c) { c.grid = "0x4"; }, "--grid: '0x4'"},
      {[](SiteConfig& c) { c.wan = "latency=120"; }, "--wan: link spec \"latency=120\": latency \"120\" needs a unit"},
      {[](SiteConfig& c) { c.wan = "latency=1ms,bw=5mbit"; },
       "--wan: link spec \"latency=1ms,bw=5mbit\": unknown field \"bw\""},
      {[](SiteConfig& c) { c.wan = "bandwidth=fast"; }, "--wan: link spec \"bandwidth=fast\": bandwidth"},
      {[](SiteConfig& c) { c.wan = "loss=1"; }, "--wan: link spec \"loss=1\": loss \"1\" is outside [0, 1)"},
      {[](SiteConfig& c) { c.wan = "latency=1ms,latency=2ms"; }, "latency is given twice"},
      {[](SiteConfig& c) { c.wan = "bandwidth=0mbit"; }, "bandwidth must be > 0"},
      {[](SiteConfig& c) { c.wan = "latency=1ms,world4"; },
       "--wan: link spec \"latency=1ms,world4\": field \"world4\""},
      {[](SiteConfig& c) { c.wan = "world4,jitter=5ms"; },
       "--region: missing: name this site's region in --wan world4,jitter=5ms (regions: oregon, ohio, london, tokyo)"},
      {[](SiteConfig& c) { c.wan = "world4"; },
       "--region: missing: name this site's region in --wan world4 (regions: oregon, ohio, london, tokyo)"},
      {[](SiteConfig& c) { c.region = "tokyo"; }, "--region: only applies with a --wan that has regions"},
      {[](SiteConfig& c) {
         c.region = "tokyo";
         c.wan = "latency=5ms";
       },
       "--region: only applies with a --wan that has regions"},
      {[](SiteConfig& c) { c.checkpoint_interval = 0; }, "--checkpoint-interval: must be a positive number"},
      {[](SiteConfig& c) { c.checkpoint_keep = 0; }, "--checkpoint-keep: 0 is below the minimum 1"},
      {[](SiteConfig& c) { c.metrics_address = "9400"; }, "--metrics-address: '9400' is not HOST:PORT or off"},
      {[](SiteConfig& c) { c.control_socket = std::string(120, 'x'); }, "--control-socket: path"},
      {[](SiteConfig& c) { c.device = "gpu"; }, "--device: 'gpu' is not auto, cpu, cuda or cuda:N"},
      {[](SiteConfig& c) { c.device = "cuda:x"; }, "--device: 'cuda:x'"},
      {[](SiteConfig& c) { c.threads = -1; }, "--threads: -1 is below the minimum 0"},
      {[](SiteConfig& c) { c.normalize = "zscore"; }, "--normalize: 'zscore' is not auto, federation or none"},
      {[](SiteConfig& c) { c.input_mean = "0.5"; },
       "--input-mean: --input-mean is given without --input-std: give both, one value per feature or channel"},
      {[](SiteConfig& c) {
         c.input_mean = "0.5,x";
         c.input_std = "1,1";
       },
       "--input-mean: --input-mean '0.5,x': value 2 ('x') is not a number"},
  };
  for (const auto& c : cases) {
    SiteConfig config = good;
    c.change(config);
    const auto problems = problems_of(config);
    INFO("expected: " << c.expected);
    CHECK_THAT(problems, Contains(c.expected));
    CHECK_THROWS_AS(validate_site_config(config), SiteConfigError);
  }

  // Insecure sites need no keys or roster; good values of the small grammars pass.
  SiteConfig local = good;
  local.insecure = true;
  local.roster = "";
  local.key_dir = "";
  local.wan = "latency=120ms,jitter=10ms,bandwidth=50mbit,loss=1%";
  local.schedule = "step:2:0.5";
  local.grid = "2x4";
  local.device = "cuda:1";
  local.heartbeat_interval = 2;
  local.heartbeat_timeout = 20;
  CHECK(problems_of(local).empty());
  local.wan = " world4 , bandwidth=0.5mbit, loss=0.1% ";
  local.region = "london";
  CHECK(problems_of(local).empty());
  // Only the mlp takes widths: the cnn's layers are fixed.
  local.model = "cnn";
  local.widths = {};
  CHECK(problems_of(local).empty());
}

TEST_CASE("the small option grammars parse to their values", "[daemon][config][unit]") {
  const auto step = parse_schedule("step:3:0.1");
  REQUIRE(step);
  CHECK(step->kind == ScheduleSpec::Kind::kStep);
  CHECK(step->step_epochs == 3);
  CHECK(step->step_factor == 0.1);
  CHECK(parse_schedule("cosine")->kind == ScheduleSpec::Kind::kCosine);
  CHECK_FALSE(parse_schedule("step:0:0.1"));
  CHECK(parse_grid("auto")->rows == 0);
  CHECK(parse_grid("3x5")->cols == 5);
  CHECK_FALSE(parse_grid("3x"));

  SiteConfig config;
  config.run_dir = "/srv/m";
  CHECK(config.checkpoint_dir_or_default() == "/srv/m/checkpoints");
  CHECK(config.control_socket_or_default() == "/srv/m/control.sock");
}

TEST_CASE("meridian init rejects a bad value with the option named", "[daemon][config][process]") {
  TempDir tmp;
  const auto err = tmp.path() / "err.txt";
  CHECK(run(std::string(meridian::tests::meridian_binary()) + " init --name x --algo gossip 2> " + err.string()) == meridian::error::kExitUser);
  CHECK_THAT(meridian::tests::file_contents(err), Contains("--algo: 'gossip' is not one of"));
}

TEST_CASE("a site listening on all interfaces without --advertise hears it from init, and start refuses before work",
          "[daemon][config][process]") {
  TempDir tmp;
  const auto file = tmp.path() / "a.toml";
  const auto init = meridian::tests::run_meridian("init --name a --out " + file.string());
  INFO(init.output);
  CHECK(init.exit_code == 0);  // a template may leave the address for later
  CHECK_THAT(init.output, Contains("note: --advertise: missing: with --listen tcp://0.0.0.0:7400 (all interfaces)") &&
                              Contains("'meridian start' refuses the file until it is set"));
  const auto start = meridian::tests::run_meridian("start --config " + file.string() + " --insecure --run-dir " +
                                                   (tmp.path() / "run").string());
  INFO(start.output);
  CHECK(start.exit_code == meridian::error::kExitUser);
  CHECK_THAT(start.output, Contains("--advertise: missing: with --listen tcp://0.0.0.0:7400"));
  CHECK_THAT(start.output, !Contains("data: "));  // refused before the data was read
  const auto reachable = meridian::tests::run_meridian("init --name a --advertise tcp://10.0.0.1:7400");
  CHECK(reachable.exit_code == 0);
  CHECK_THAT(reachable.output, !Contains("note:"));
}

TEST_CASE("start refuses a missing key pair or roster, or one that does not list this site, before it reads the data",
          "[daemon][config][process]") {
  TempDir tmp;
  // The data file holds no table: a start that got as far as reading it would say so instead.
  std::ofstream(tmp.path() / "broken.csv") << "label\n";
  const std::string common = "start --name alpha --listen tcp://127.0.0.1:0 --metrics-address off --train " +
                             (tmp.path() / "broken.csv").string() + " --run-dir " + (tmp.path() / "run").string();
  const auto start = [&](const std::string& key_dir, const std::string& roster) {
    return meridian::tests::run_meridian(common + " --key-dir " + key_dir + " --roster " + roster);
  };
  const auto keys = meridian::peer::generate_curve_key_pair();
  meridian::peer::write_key_pair(keys, tmp.path() / "keys");
  const auto roster_with = [&](const std::string& line) {
    const auto file = tmp.path() / "roster.txt";
    std::ofstream(file) << line << "\n";
    return file.string();
  };

  const auto no_key = start((tmp.path() / "no-keys").string(), roster_with("alpha " + keys.public_key));
  INFO(no_key.output);
  CHECK(no_key.exit_code == meridian::error::kExitUser);
  CHECK_THAT(no_key.output, Contains("cannot read secret key " + (tmp.path() / "no-keys" / "secret.key").string()));

  const auto no_roster = start((tmp.path() / "keys").string(), (tmp.path() / "absent-roster.txt").string());
  INFO(no_roster.output);
  CHECK(no_roster.exit_code == meridian::error::kExitUser);
  CHECK_THAT(no_roster.output, Contains("absent-roster.txt"));

  const auto other = meridian::peer::generate_curve_key_pair();
  const auto not_listed = start((tmp.path() / "keys").string(), roster_with("beta " + other.public_key));
  INFO(not_listed.output);
  CHECK(not_listed.exit_code == meridian::error::kExitUser);
  CHECK_THAT(not_listed.output, Contains("site 'alpha' is not in the roster"));

  const auto other_key = start((tmp.path() / "keys").string(), roster_with("alpha " + other.public_key));
  INFO(other_key.output);
  CHECK(other_key.exit_code == meridian::error::kExitUser);
  CHECK_THAT(other_key.output, Contains("lists another public key for site 'alpha'"));

  for (const auto* result : {&no_key, &no_roster, &not_listed, &other_key})
    CHECK_THAT(result->output, !Contains("broken.csv") && !Contains("data: "));
}

TEST_CASE("a secure site started from another directory finds the keys, roster and data its config file names",
          "[daemon][config][process]") {
  TempDir tmp;
  // Everything beside the config file, named relative to it, as a service manager would find it.
  const auto site = tmp.path() / "alpha";
  std::filesystem::create_directories(site / "data");
  const auto keys = meridian::peer::generate_curve_key_pair();
  meridian::peer::write_key_pair(keys, site / "keys");
  std::ofstream(site / "roster.txt") << "alpha " << keys.public_key << "\n";
  meridian::tests::write_small_table(site / "data", "train.csv", {"dog", "cat"});
  std::ofstream(site / "site.toml") << "name = \"alpha\"\n"
                                       "listen = \"tcp://127.0.0.1:0\"\n"
                                       "metrics-address = \"off\"\n"
                                       "key-dir = \"keys\"\n"
                                       "roster = \"roster.txt\"\n"
                                       "run-dir = \"run\"\n"
                                       "dataset = \"csv\"\n"
                                       "train-csv = \"data/train.csv\"\n"
                                       "algo = \"local\"\n"
                                       "model = \"logreg\"\n"
                                       "batch = 8\n"
                                       "epochs = 1.0\n"
                                       "threads = 1\n";
  std::filesystem::create_directories(tmp.path() / "elsewhere");
  const auto result =
      meridian::tests::run_shell("cd " + (tmp.path() / "elsewhere").string() + " && " +
                                 meridian::tests::meridian_binary() + " start --config ../alpha/site.toml 2>&1");
  INFO(result.output);
  CHECK(result.exit_code == 0);
  CHECK_THAT(result.output, Contains("CurveZMQ, roster ../alpha/roster.txt"));
  CHECK(std::filesystem::exists(site / "run" / "result.json"));
  CHECK_FALSE(std::filesystem::exists(tmp.path() / "elsewhere" / "run"));
}
