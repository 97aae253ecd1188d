// The pieces of `meridian simulate` that turn measurements into a table, CSV files and a plot, on fixed
// inputs; and the readers of the files the sites write.
#include <catch2/catch.hpp>

#include <algorithm>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>

#include "cli/accuracy_plot.h"
#include "cli/algorithm_comparison.h"
#include "cli/algorithm_variant.h"
#include "cli/comparison_table.h"
#include "cli/progress_log.h"
#include "cli/simulation_csv.h"
#include "cli/simulation_options.h"
#include "cli/site_result.h"
#include "daemon/algorithms/registry.h"
#include "tests/daemon/toy_algorithm.h"
#include "tests/support/temp_dir.h"

using namespace meridian::cli;

namespace {

ProgressRecord record(double time, const std::string& site, std::uint64_t step, std::optional<double> accuracy) {
  ProgressRecord r;
  r.time = time;
  r.site = site;
  r.step = step;
  r.test_accuracy = accuracy;
  return r;
}

SiteResult result(const std::string& site, double seconds_per_step, double accuracy, std::uint64_t sent) {
  SiteResult r;
  r.site = site;
  r.algo = "sgp";
  r.steps = 100;
  r.seconds_per_step = seconds_per_step;
  r.test_accuracy = accuracy;
  r.bytes_sent = sent;
  r.bytes_received = sent / 2;
  r.rounds_abandoned = 1;
  return r;
}

// Two sites launched at t=1000: site-0 reaches 80% at +20 s, site-1 only at +30 s.
AlgorithmOutcome two_site_outcome() {
  AlgorithmOutcome o;
  o.algo = "sgp";
  o.sites = 2;
  o.launch_time = 1000;
  o.wall_seconds = 42;
  o.progress = {record(1010, "site-0", 50, 0.70), record(1011, "site-1", 50, std::nullopt),
                record(1020, "site-0", 100, 0.81), record(1021, "site-1", 100, 0.78),
                record(1030, "site-1", 150, 0.83)};
  o.results = {result("site-0", 0.2, 0.84, 1000), result("site-1", 0.4, 0.82, 3000)};
  // Start-up took 6 s on site-1 and 8 s on site-0; by +30 s site-1 had spent 3 s evaluating.
  o.results[0].train_start = 1008;
  o.results[1].train_start = 1006;
  o.progress.back().eval_seconds = 3;
  o.averaged_accuracy = 0.85;
  return o;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

}  // namespace

TEST_CASE("accuracy curves count from the launch and skip records without accuracy", "[cli][simulate][unit]") {
  const auto curve = accuracy_curve(two_site_outcome());
  REQUIRE(curve.size() == 4);
  CHECK(curve[0].seconds == Approx(10));
  CHECK(curve[0].site == "site-0");
  CHECK(curve[3].seconds == Approx(30));
  CHECK(curve[3].accuracy == Approx(0.83));
  CHECK(curve[3].algo == "sgp");
}

TEST_CASE("time to accuracy waits for the slowest site and is missing when a site never gets there",
          "[cli][simulate][unit]") {
  const auto curve = accuracy_curve(two_site_outcome());
  CHECK(seconds_to_accuracy(curve, 2, 0.80) == Approx(30));
  CHECK(seconds_to_accuracy(curve, 2, 0.70) == Approx(21));  // site-0 at 10 s, site-1 at 21 s
  CHECK_FALSE(seconds_to_accuracy(curve, 2, 0.84));
  CHECK_FALSE(seconds_to_accuracy(curve, 3, 0.50));  // a third site never reported
  CHECK_FALSE(seconds_to_accuracy({}, 2, 0.1));
}

TEST_CASE("a comparison row's per-site means of whole numbers are exact", "[cli][simulate][unit]") {
  AlgorithmOutcome o;
  o.algo = "dts";
  o.sites = 6;
  for (int i = 0; i < 6; ++i) {
    o.results.push_back(result("site-" + std::to_string(i), 0.1, 0.8, 49));
    o.results.back().steps = 49;
  }
  const ComparisonRow row = summarize(o, 0.9);
  CHECK(row.steps_per_site == 49.0);  // adding 49 / 6 six times gives 48.99999999999999
  CHECK(row.bytes_sent_per_site == 49.0);
  CHECK_THAT(comparison_json({row}, ComparisonContext{}), Catch::Matchers::Contains("\"steps_per_site\": 49.0,"));
}

TEST_CASE("a comparison row averages the sites' results", "[cli][simulate][unit]") {
  const ComparisonRow row = summarize(two_site_outcome(), 0.8);
  CHECK(row.algo == "sgp");
  CHECK(row.sites == 2);
  CHECK(*row.averaged_accuracy == Approx(0.85));
  CHECK(*row.mean_site_accuracy == Approx(0.83));
  CHECK(row.seconds_per_step == Approx(0.3));
  CHECK(*row.seconds_to_target == Approx(30));
  // From the first site's first step (+6 s), less site-1's evaluations: 30 − 6 − 3.
  CHECK(*row.training_seconds_to_target == Approx(21));
  CHECK(row.bytes_sent_per_site == Approx(2000));
  CHECK(row.bytes_received_per_site == Approx(1000));
  CHECK(row.steps_per_site == Approx(100));
  CHECK(row.rounds_abandoned == 2);
  CHECK(row.wall_seconds == Approx(42));

  // A result without train_start (written before it existed) leaves the training figure out.
  AlgorithmOutcome older = two_site_outcome();
  older.results[1].train_start = 0;
  CHECK(summarize(older, 0.8).seconds_to_target);
  CHECK_FALSE(summarize(older, 0.8).training_seconds_to_target);
}

TEST_CASE("the comparison table aligns its columns and shows missing values as a dash", "[cli][simulate][unit]") {
  ComparisonRow sgp = summarize(two_site_outcome(), 0.8);
  ComparisonRow allreduce;
  allreduce.algo = "allreduce";
  allreduce.sites = 2;
  allreduce.seconds_per_step = 1.25;
  allreduce.steps_per_site = 10;
  allreduce.bytes_sent_per_site = 352e6;
  allreduce.wall_seconds = 302;
  const std::string table = format_comparison_table({allreduce, sgp}, 0.8);
  const auto lines = lines_of(table);
  REQUIRE(lines.size() == 3);
  CHECK(lines[0].starts_with("algorithm"));
  CHECK(lines[0].find("to 80.0%") != std::string::npos);
  CHECK(lines[0].find("of it training") != std::string::npos);
  CHECK(lines[1].starts_with("allreduce"));
  CHECK(lines[1].find("1.25 s") != std::string::npos);
  CHECK(lines[1].find("352 MB") != std::string::npos);
  CHECK(lines[1].find("5 min 2 s") != std::string::npos);
  CHECK(lines[1].find("\xE2\x80\x94") != std::string::npos);  // no accuracy, never reached the target
  CHECK(lines[2].starts_with("sgp      "));
  CHECK(lines[2].find("85.0%") != std::string::npos);
  CHECK(lines[2].find("83.0%") != std::string::npos);
  CHECK(lines[2].find("300 ms") != std::string::npos);
  CHECK(lines[2].find("30 s") != std::string::npos);
  CHECK(lines[2].find("21 s") != std::string::npos);
  CHECK(lines[2].find("2.0 kB") != std::string::npos);
  // Right-aligned numbers: every line has the same display width (the dash is one column, three bytes).
  const auto width = [](const std::string& s) {
    return std::count_if(s.begin(), s.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; });
  };
  CHECK(width(lines[0]) == width(lines[1]));
  CHECK(width(lines[1]) == width(lines[2]));
}

TEST_CASE("step times keep their resolution", "[cli][simulate][unit]") {
  CHECK(format_step_time(1.234) == "1.23 s");
  CHECK(format_step_time(0.052) == "52 ms");
  CHECK(format_step_time(0.0045) == "4.5 ms");
}

TEST_CASE("results.csv has one row per algorithm with empty fields for missing values", "[cli][simulate][unit]") {
  AlgorithmOutcome stopped = two_site_outcome();
  stopped.stopped_at_target = true;
  ComparisonRow sgp = summarize(stopped, 0.8);
  ComparisonRow local;
  local.algo = "local";
  local.sites = 2;
  local.bytes_sent_per_site = 123456789;
  const auto lines = lines_of(results_csv({sgp, local}, 0.8));
  REQUIRE(lines.size() == 3);
  CHECK(lines[0] ==
        "algo,sites,test_accuracy,mean_site_accuracy,seconds_per_step,target_accuracy,seconds_to_target,"
        "bytes_sent_per_site,bytes_received_per_site,steps_per_site,rounds_abandoned,wall_seconds,"
        "training_seconds_to_target,stopped_at_target");
  CHECK(lines[1] == "sgp,2,0.85,0.83,0.3,0.8,30,2000,1000,100,2,42,21,1");
  CHECK(lines[2] == "local,2,,,0,0.8,,123456789,0,0,0,0,,0");
}

TEST_CASE("curves.csv has one row per evaluation", "[cli][simulate][unit]") {
  const auto lines = lines_of(curves_csv(accuracy_curve(two_site_outcome())));
  REQUIRE(lines.size() == 5);
  CHECK(lines[0] == "time,algo,site,step,accuracy");
  CHECK(lines[1] == "10,sgp,site-0,50,0.7");
  CHECK(lines[4] == "30,sgp,site-1,150,0.83");
}

TEST_CASE("the accuracy plot is an SVG document with a line per site and a legend entry per algorithm",
          "[cli][simulate][unit]") {
  AlgorithmOutcome other = two_site_outcome();
  other.algo = "allreduce&co";  // escaped in the text
  for (auto& r : other.progress) r.time += 5;
  auto points = accuracy_curve(two_site_outcome());
  const auto more = accuracy_curve(other);
  points.insert(points.end(), more.begin(), more.end());
  const std::vector<ComparisonRow> rows = {summarize(two_site_outcome(), 0.8), summarize(other, 0.8)};
  AccuracyPlotLabels labels;
  labels.subtitle = "2 sites, WAN world4";
  labels.target_accuracy = 0.8;
  const std::string svg = render_accuracy_svg(points, rows, labels);
  CHECK(svg.starts_with("<?xml"));
  CHECK(svg.find("<svg xmlns=\"http://www.w3.org/2000/svg\"") != std::string::npos);
  CHECK(svg.ends_with("</svg>\n"));
  const auto count = [&](const std::string& what) {
    std::size_t n = 0;
    for (auto at = svg.find(what); at != std::string::npos; at = svg.find(what, at + 1)) ++n;
    return n;
  };
  CHECK(count("<polyline") == 4);  // 2 algorithms x 2 sites
  CHECK(count("<circle") == 8);    // one per evaluation
  CHECK(count("averaged model</title>") == 2);
  CHECK(svg.find("allreduce&amp;co") != std::string::npos);
  CHECK(svg.find("allreduce&co") == std::string::npos);
  CHECK(svg.find("target 80.0%") != std::string::npos);
  CHECK(svg.find("2 sites, WAN world4") != std::string::npos);
  // Every coordinate is a plain number inside the canvas.
  const std::regex coordinate("c[xy]=\"([-0-9.]+)\"");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), coordinate); it != std::sregex_iterator(); ++it) {
    const double v = std::stod((*it)[1]);
    CHECK(v >= 0);
    CHECK(v <= 820);
  }
  const std::string empty = render_accuracy_svg({}, {}, {});
  CHECK(empty.find("no evaluations") != std::string::npos);
  CHECK(empty.find("nan") == std::string::npos);
  CHECK(empty.find("inf") == std::string::npos);
}

TEST_CASE("a long algorithm variant widens the plot so that its legend entry fits", "[cli][simulate][unit]") {
  AlgorithmOutcome o = two_site_outcome();
  o.algo = "dts:delay=4:period=32:exchange=direct";
  const std::string svg = render_accuracy_svg(accuracy_curve(o), {summarize(o, 0.8)}, {});
  std::smatch m;
  REQUIRE(std::regex_search(svg, m, std::regex("<svg [^>]*width=\"([0-9.]+)\"")));
  const double width = std::stod(m[1]);
  REQUIRE(std::regex_search(svg, m,
                            std::regex("<text x=\"([0-9.]+)\" y=\"[0-9.]+\">dts:delay=4:period=32:exchange=direct<")));
  // 8 px per character is more than DejaVu Sans needs at 13 px.
  CHECK(std::stod(m[1]) + 8.0 * o.algo.size() <= width);
  CHECK(width > 820);
  // A short name keeps a narrower canvas, never narrower than the usual 820 px.
  const std::string plain = render_accuracy_svg(accuracy_curve(two_site_outcome()), {}, {});
  REQUIRE(std::regex_search(plain, m, std::regex("<svg [^>]*width=\"([0-9.]+)\"")));
  CHECK(std::stod(m[1]) >= 820);
  CHECK(std::stod(m[1]) < width);
}

TEST_CASE("progress.jsonl lines are read as they are completed and bad lines are named", "[cli][simulate][unit]") {
  meridian::tests::TempDir dir;
  const auto file = dir.path() / "progress.jsonl";
  ProgressLogFollower follower(file);
  CHECK(follower.read_new().empty());  // not there yet
  {
    std::ofstream out(file);
    out << R"({"time": 1.5, "site": "site-0", "step": 10, "epoch": 0, "train_loss": 0.5, "test_accuracy": 0.75,)"
        << R"( "bytes_sent": 10, "bytes_received": 20})"
        << "\n"
        << R"({"time": 2.5, "site": "site-0", "step": 20, "epoch": 1, "train_loss": null, "test_accuracy": null,)";
  }
  auto first = follower.read_new();
  REQUIRE(first.size() == 1);
  CHECK(first[0].time == 1.5);
  CHECK(first[0].step == 10);
  CHECK(*first[0].test_accuracy == Approx(0.75));
  CHECK(first[0].bytes_received == 20);
  {
    std::ofstream out(file, std::ios::app);
    out << R"( "bytes_sent": 30, "bytes_received": 40, "eval_seconds": 0.25})"
        << "\n";
  }
  auto second = follower.read_new();
  REQUIRE(second.size() == 1);
  CHECK(first[0].eval_seconds == 0);  // older trails have no eval_seconds
  CHECK(second[0].eval_seconds == 0.25);
  CHECK(second[0].epoch == 1);
  CHECK_FALSE(second[0].test_accuracy);
  CHECK(std::isnan(second[0].train_loss));
  {
    std::ofstream out(file, std::ios::app);
    out << R"({"time": 3, "site": "site-0", "step": 30, "epoch": 1, "train_loss": 0.1, "test_accuracy": 7,)"
        << R"( "bytes_sent": 1, "bytes_received": 1})"
        << "\n";
  }
  try {
    follower.read_new();
    FAIL("an accuracy of 7 was accepted");
  } catch (const ProgressLogError& e) {
    CHECK(std::string(e.what()).find("progress.jsonl line 3") != std::string::npos);
    CHECK(std::string(e.what()).find("outside [0, 1]") != std::string::npos);
  }
  CHECK_THROWS_WITH(parse_progress_record("{\"time\": 1}", "x"), Catch::Contains("missing field \"site\""));
  CHECK_THROWS_WITH(parse_progress_record("not json", "x"), Catch::Contains("not valid JSON"));
}

TEST_CASE("result.json is read and checked", "[cli][simulate][unit]") {
  meridian::tests::TempDir dir;
  const auto file = dir.path() / "result.json";
  CHECK_THROWS_WITH(read_site_result(file), Catch::Contains("did not finish normally"));
  {
    std::ofstream out(file);
    out << R"({"site": "site-1", "algo": "dts", "steps": 702, "epochs": 3, "train_seconds": 81.2,
               "seconds_per_step": 0.116, "test_accuracy": 0.861, "bytes_sent": 1.2e8, "bytes_received": 5,
               "rounds_abandoned": 0, "final_checkpoint": "/x/checkpoint.mrdn"})";
  }
  const SiteResult r = read_site_result(file);
  CHECK(r.site == "site-1");
  CHECK(r.algo == "dts");
  CHECK(r.steps == 702);
  CHECK(r.bytes_sent == 120000000);
  CHECK(*r.test_accuracy == Approx(0.861));
  CHECK(r.final_checkpoint == "/x/checkpoint.mrdn");
  CHECK(r.train_start == 0);  // not in this (older) file
  {
    std::ofstream out(file);
    out << R"({"site": "site-1", "algo": "dts", "steps": 702, "epochs": 3, "train_seconds": 81.2,
               "seconds_per_step": 0.116, "test_accuracy": 0.861, "bytes_sent": 1.2e8, "bytes_received": 5,
               "rounds_abandoned": 0, "final_checkpoint": "/x/checkpoint.mrdn", "train_start": 1795617550.5})";
  }
  CHECK(read_site_result(file).train_start == Approx(1795617550.5));
  {
    std::ofstream out(file);
    out << R"({"site": "site-1"})";
  }
  CHECK_THROWS_WITH(read_site_result(file), Catch::Contains("missing field \"algo\""));
}

TEST_CASE("simulation options are checked before anything starts", "[cli][simulate][unit]") {
  SimulationOptions o;
  o.algos = {"allreduce", "sgp"};
  CHECK(simulation_problems(o).empty());
  o.site.wan = "world4";
  CHECK(simulation_problems(o).empty());
  o.sites = 0;
  o.algos = {"sgp", "fedavg", "sgp", ""};
  o.target_accuracy = 80;
  const auto problems = simulation_problems(o);
  const auto has = [&](const std::string& text) {
    return std::any_of(problems.begin(), problems.end(),
                       [&](const std::string& p) { return p.find(text) != std::string::npos; });
  };
  CHECK(has("--sites: 0 is not in 1..64"));
  CHECK(has("'sgp' is listed twice"));
  CHECK(has("an empty name"));
  CHECK(has("fedavg"));
  CHECK(has("--target-accuracy"));
  CHECK(split_algorithm_list("allreduce, sgp") == std::vector<std::string>{"allreduce", "sgp"});
  CHECK(simulated_site_region("world4", 5) == "ohio");
  CHECK(simulated_site_region("latency=10ms", 5).empty());
  CHECK(simulated_site_region("", 0).empty());
}

TEST_CASE("a dts entry without a delay or period runs D = 2, P = 16", "[cli][simulate][unit]") {
  const auto shape_of = [](const std::string& entry, bool shared_delay, bool shared_period) {
    meridian::daemon::SiteConfig config;
    std::string error;
    error = apply_algorithm_variant(parse_algorithm_variant(entry).variant, config, [&](std::string_view option) {
              return (option == "delay" && shared_delay) || (option == "period" && shared_period);
            }).value_or("");
    REQUIRE(error.empty());
    return std::pair{config.delay, config.period};
  };
  CHECK(shape_of("dts", false, false) == std::pair{2, 16});
  CHECK(shape_of("dts:period=4", false, false) == std::pair{0, 4});  // a knob keeps the user's shape
  CHECK(shape_of("dts:delay=1", false, false) == std::pair{1, 1});
  CHECK(shape_of("dts", true, false) == std::pair{0, 1});  // simulate --delay 0
  CHECK(shape_of("dts", false, true) == std::pair{0, 1});  // simulate --period 1
  CHECK(shape_of("sgp", false, false) == std::pair{0, 1});
}

TEST_CASE("an --algo entry may carry its own knobs", "[cli][simulate][unit]") {
  const auto parsed = parse_algorithm_variant("dts:delay=4:period=2");
  REQUIRE(parsed.error.empty());
  CHECK(parsed.variant.algo == "dts");
  CHECK(parsed.variant.label == "dts:delay=4:period=2");
  meridian::daemon::SiteConfig config;
  config.delay = 1;
  config.tau = 3;
  std::string error;
  error = apply_algorithm_variant(parsed.variant, config).value_or("");
  CHECK(error.empty());
  CHECK(config.algo == "dts");
  CHECK(config.delay == 4);
  CHECK(config.period == 2);
  CHECK(config.tau == 3);  // not named: the shared value stays

  CHECK(parse_algorithm_variant("sgp").variant.knobs.empty());
  // compression=topk:F keeps its own ':'; compensation is a text knob.
  const auto topk = parse_algorithm_variant("dts:delay=8:compression=topk:0.05:compensation=off");
  REQUIRE(topk.error.empty());
  error = apply_algorithm_variant(topk.variant, config).value_or("");
  CHECK(error.empty());
  CHECK(config.compression == "topk:0.05");
  CHECK(config.compensation == "off");
  CHECK(config.delay == 8);
  error = apply_algorithm_variant(parse_algorithm_variant("dts:delay=4:period=32:exchange=direct").variant, config)
              .value_or("");
  CHECK(error.empty());
  CHECK(config.exchange == "direct");
  CHECK_THAT(parse_algorithm_variant("dts:compression=fp16:0.05").error, Catch::Contains("not KNOB=VALUE"));
  CHECK_THAT(parse_algorithm_variant("dts:speed=4").error, Catch::Contains("unknown knob 'speed'"));
  CHECK_THAT(parse_algorithm_variant("dts:delay").error, Catch::Contains("not KNOB=VALUE"));
  CHECK_THAT(parse_algorithm_variant("dts:delay=").error, Catch::Contains("has no value"));
  error = apply_algorithm_variant(parse_algorithm_variant("sgp:tau=two").variant, config).value_or("");
  CHECK_THAT(error, Catch::Contains("tau 'two' is not a whole number"));

  SimulationOptions o;
  o.algos = {"dts:delay=4", "dts:delay=-1", "sgp:tau=x"};
  const auto problems = simulation_problems(o);
  const auto has = [&](const std::string& text) {
    return std::any_of(problems.begin(), problems.end(),
                       [&](const std::string& p) { return p.find(text) != std::string::npos; });
  };
  // A shape knob takes a whole number >= 0 or auto (daemon/algorithms/auto_shape.h).
  CHECK(has("'dts:delay=-1': delay '-1' is not a whole number >= 0 or auto"));
  CHECK(has("'sgp:tau=x'"));
  CHECK_FALSE(has("'dts:delay=4'"));
}

TEST_CASE("an --algo entry may carry the options its algorithm declares, parsed to their types",
          "[unit][cli][simulate]") {
  CHECK(algorithm_variant_knobs() ==
        "delay, period, out-peers, tau, grid, reaverage-every, compensation, compression, exchange, inner-steps, "
        "overlap, fragments, outer-lr, outer-momentum");
  meridian::daemon::SiteConfig config;
  std::string error;
  error =
      apply_algorithm_variant(parse_algorithm_variant("diloco:inner-steps=64:fragments=4:outer-lr=1").variant, config)
          .value_or("");
  REQUIRE(error.empty());
  const auto& options = config.algorithm_options;
  CHECK(options.whole(*meridian::daemon::algorithms::find_algorithm_option("fragments")) == 4);
  CHECK(options.real(*meridian::daemon::algorithms::find_algorithm_option("outer-lr")) == 1.0);
  CHECK(options.whole(*meridian::daemon::algorithms::find_algorithm_option("inner-steps")) == 64);
  // diloco's default overlap: none given
  CHECK(options.whole(*meridian::daemon::algorithms::find_algorithm_option("overlap")) == meridian::daemon::kAutoShape);
  error = apply_algorithm_variant(parse_algorithm_variant("diloco:fragments=2.5").variant, config).value_or("");
  CHECK(error == "--algo: 'diloco:fragments=2.5': fragments '2.5' is not a whole number");
  error = apply_algorithm_variant(parse_algorithm_variant("diloco:outer-lr=fast").variant, config).value_or("");
  CHECK(error == "--algo: 'diloco:outer-lr=fast': outer-lr 'fast' is not a number");

  // An algorithm registered by a test: its option is a knob, and only while it is registered.
  const meridian::tests::ToyAlgorithm toy;
  {
    const meridian::daemon::algorithms::AlgorithmRegistration registration(toy);
    CHECK_THAT(algorithm_variant_knobs(), Catch::EndsWith(", outer-momentum, toy-strength"));
    const auto parsed = parse_algorithm_variant("toy:toy-strength=0.25");
    REQUIRE(parsed.error.empty());
    meridian::daemon::SiteConfig toy_config;
    toy_config.name = "a";
    error.clear();
    error = apply_algorithm_variant(parsed.variant, toy_config).value_or("");
    CHECK(error.empty());
    CHECK(toy_config.algorithm_options.real(meridian::tests::kToyStrength) == 0.25);
    CHECK(meridian::daemon::describe_algorithm(meridian::daemon::settings_of(toy_config)) == "toy, strength 0.25");
  }
  CHECK_THAT(parse_algorithm_variant("toy:toy-strength=0.25").error, Catch::Contains("unknown knob 'toy-strength'"));
}

TEST_CASE("--algo entries with automatic shapes: dts:delay=auto, sgp:tau=auto, and diloco by default",
          "[unit][cli][simulate][auto_shape]") {
  using meridian::daemon::kAutoShape;
  // Whether the configuration has a problem with the shape's options (it lacks a name and keys, which
  // simulate adds per site).
  const auto shape_problem = [](const meridian::daemon::SiteConfig& config) {
    const auto problems = meridian::daemon::site_config_problems(config);
    return std::any_of(problems.begin(), problems.end(), [](const std::string& p) {
      return p.rfind("--delay", 0) == 0 || p.rfind("--tau", 0) == 0 || p.rfind("--period", 0) == 0 ||
             p.rfind("--overlap", 0) == 0 || p.rfind("--inner-steps", 0) == 0;
    });
  };
  const auto configured = [](const std::string& entry) {
    meridian::daemon::SiteConfig config;
    const auto error = apply_algorithm_variant(parse_algorithm_variant(entry).variant, config).value_or("");
    INFO(entry << ": " << error);
    CHECK(error.empty());
    return config;
  };
  const auto dts = configured("dts:delay=auto:exchange=direct");
  CHECK(dts.delay == kAutoShape);
  CHECK_FALSE(shape_problem(dts));
  const auto sgp = configured("sgp:tau=auto");
  CHECK(sgp.tau == kAutoShape);
  CHECK_FALSE(shape_problem(sgp));
  const auto whole = [](const meridian::daemon::SiteConfig& config, std::string_view name) {
    return config.algorithm_options.whole(*meridian::daemon::algorithms::find_algorithm_option(name));
  };
  const auto diloco = configured("diloco");
  CHECK(whole(diloco, "overlap") == kAutoShape);
  CHECK(whole(diloco, "inner-steps") == 32);
  CHECK_FALSE(shape_problem(diloco));
  CHECK(whole(configured("diloco:overlap=2"), "overlap") == 2);  // a hand-picked overlap stays
  CHECK(whole(configured("diloco:delay=2"), "overlap") == 2);    // the old spelling, for one more release
  // dts chooses P = 8·D itself: a period beside an automatic delay is refused.
  const auto both = configured("dts:delay=auto:period=16");
  const auto problems = meridian::daemon::site_config_problems(both);
  CHECK(std::any_of(problems.begin(), problems.end(),
                    [](const std::string& p) { return p.find("--period: dts with --delay auto") == 0; }));
}

TEST_CASE("the plot names the model and the data the run trained on", "[cli][simulate][unit]") {
  meridian::daemon::SiteConfig site;
  CHECK(model_and_data(site) == "mlp on fashion-mnist");
  site.train = "/data/hospital/train.csv";
  CHECK(model_and_data(site) == "mlp on train.csv");
  site.train.clear();
  site.dataset = "csv";
  site.train_csv = "clinic/visits.csv";
  site.model = "cnn";
  CHECK(model_and_data(site) == "cnn on visits.csv");
  site.model = "models/tabular.txt";
  CHECK(model_and_data(site, {"/x/ohio.csv", "/y/utah.csv"}) == "tabular.txt on ohio.csv, utah.csv");
}
