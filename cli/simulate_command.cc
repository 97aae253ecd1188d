// `meridian simulate`: N real sites on this machine with an emulated WAN, one algorithm after the other,
// and a comparison of what each reached: the way to choose an algorithm for a network before going live.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "cli/accuracy_plot.h"
#include "cli/algorithm_run.h"
#include "cli/algorithm_variant.h"
#include "cli/commands.h"
#include "cli/comparison_table.h"
#include "cli/interrupt_flag.h"
#include "cli/loopback_ports.h"
#include "cli/simulation_csv.h"
#include "cli/simulation_layout.h"
#include "cli/simulation_options.h"
#include "cli/status_line.h"
#include "daemon/algorithms/registry.h"
#include "daemon/checkpoint/checkpoint_model.h"
#include "daemon/site_data.h"
#include "error/error.h"

namespace meridian::cli {
namespace {

namespace fs = std::filesystem;

void write_text_file(const fs::path& file, const std::string& text) {
  std::ofstream out(file, std::ios::trunc | std::ios::binary);
  out << text;
  out.close();
  if (!out) throw error::UserError("cannot write " + file.string());
}

// The averaged final model's accuracy: the daemon's checkpoint reader de-biases (sgp) and averages the
// sites' final models and evaluates the result on the test set the sites used.
AveragedModelEvaluator averaged_model_evaluator() {
  return [](const std::vector<fs::path>& checkpoints, const daemon::SiteConfig& config) {
    // Scaled as the sites trained: with the input scaling their checkpoints carry.
    models::data::Standardization scaling;
    if (!checkpoints.empty()) {
      auto first = daemon::read_checkpoint_file(checkpoints.front());
      scaling = {std::move(first.input_mean), std::move(first.input_stddev)};
    }
    return daemon::evaluate_checkpoints(checkpoints, daemon::load_test_data(config, scaling)).evaluation.accuracy;
  };
}

std::string describe(const SimulationOptions& o) {
  std::string algos;
  for (const auto& a : o.algos) algos += (algos.empty() ? "" : ", ") + a;
  if (!o.trainer_command.empty())
    return std::to_string(o.sites) + " sites on 127.0.0.1, WAN " + (o.site.wan.empty() ? "none" : o.site.wan) +
           ", each trained by `" + o.trainer_command + "`; algorithms: " + algos;
  char epochs[32];
  std::snprintf(epochs, sizeof epochs, "%g", static_cast<double>(o.site.epochs));
  return std::to_string(o.sites) + " sites on 127.0.0.1, WAN " + (o.site.wan.empty() ? "none" : o.site.wan) + ", " +
         o.site.model + " on " + o.site.dataset + " (" + o.site.partition + "), " + epochs + " epoch(s), " +
         std::to_string(o.threads_per_site) + " thread(s) per site; algorithms: " + algos;
}

// Throws error::UserError listing every problem of `options` (simulation_problems).
void check_simulation(const SimulationOptions& options) {
  const auto problems = simulation_problems(options);
  if (problems.empty()) return;
  std::string text = "invalid simulation:";
  for (const auto& p : problems) text += "\n  " + p;
  throw error::UserError(text);
}

int run_simulation(SimulationOptions options, const std::string& algo_list) {
  options.algos = split_algorithm_list(algo_list);
  check_simulation(options);
  const fs::path out_dir = fs::absolute(options.out_dir).lexically_normal();
  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (ec) throw error::UserError("cannot create --out " + out_dir.string() + ": " + ec.message());

  // Progress and notes go to stderr so that --json leaves stdout to the JSON object alone.
  StatusLine status(stderr);
  status.print("simulate: " + describe(options));
  if (options.site.insecure) {
    status.print("simulate: --insecure: sites talk plain TCP without authentication (local experiments only)");
  } else {
    const fs::path roster = create_simulation_identities(out_dir, options.sites);
    status.print("simulate: CurveZMQ keys in " + (out_dir / "keys").string() + ", roster " + roster.string());
  }

  // An attached site reads no data: the trainer command reads its own.
  if (options.trainer_command.empty() && options.site.train.empty() &&
      daemon::parse_dataset(options.site.dataset) != daemon::Dataset::kCsv && options.data_cache != "none") {
    std::string note;
    const fs::path dir = unpacked_idx_dir(options.site.data_dir, options.data_cache, note);
    if (note.empty()) {
      options.site.data_dir = dir.string();
      status.print("simulate: the sites read the IDX files unpacked in " + dir.string());
    } else {
      status.print("simulate: every site unpacks the IDX files itself (" + note + ")");
    }
  }

  InterruptFlag interrupt;
  AlgorithmRunSettings settings;
  settings.program = options.program;
  settings.timeout_seconds = options.timeout_seconds;
  if (options.stop_at_target) settings.stop_at_accuracy = options.target_accuracy;
  // The trainer command's model is its own: simulate cannot average and evaluate it; each site's
  // accuracy is the one its trainer reported.
  const AveragedModelEvaluator evaluate =
      options.trainer_command.empty() ? averaged_model_evaluator() : AveragedModelEvaluator{};

  std::vector<ComparisonRow> rows;
  std::vector<CurvePoint> curves;
  for (const auto& algo : options.algos) {
    const auto ports = free_loopback_ports(options.sites);
    const auto sites = plan_algorithm_sites(options, algo, out_dir, ports);
    const AlgorithmOutcome outcome = run_algorithm(algo, sites, settings, evaluate, interrupt, status);
    rows.push_back(summarize(outcome, options.target_accuracy));
    const auto curve = accuracy_curve(outcome);
    curves.insert(curves.end(), curve.begin(), curve.end());
  }

  ComparisonContext context;
  context.sites = options.sites;
  context.wan = options.site.wan;
  context.partition = options.site.partition;
  context.model = options.site.model;
  context.epochs = options.site.epochs;
  context.target_accuracy = options.target_accuracy;
  context.results_csv = out_dir / "results.csv";
  context.curves_csv = out_dir / "curves.csv";
  context.plot_svg = out_dir / "accuracy.svg";
  write_text_file(context.results_csv, results_csv(rows, options.target_accuracy));
  write_text_file(context.curves_csv, curves_csv(curves));
  AccuracyPlotLabels labels;
  labels.subtitle =
      std::to_string(options.sites) + " sites, WAN " + (options.site.wan.empty() ? "none" : options.site.wan) + ", " +
      (options.trainer_command.empty() ? model_and_data(options.site, options.site_train) +
                                             (options.site_train.empty() ? " (" + options.site.partition + ")" : "")
                                       : "trainer: " + options.trainer_command);
  labels.target_accuracy = options.target_accuracy;
  write_text_file(context.plot_svg, render_accuracy_svg(curves, rows, labels));

  if (options.json) {
    std::fputs(comparison_json(rows, context).c_str(), stdout);
  } else {
    std::printf("\n%s\n", format_comparison_table(rows, options.target_accuracy).c_str());
    std::printf(
        "accuracy: the average of the sites' final models on the test set; site acc.: mean of each site's own\n"
        "model; per step: mean seconds per training step; to %.1f%%: from the launch until every site reached\n"
        "it; of it training: the same from the first step (without start-up); sent/site: bytes each site sent,\n"
        "mean over sites; wall time: from start to the last site's end.\n",
        options.target_accuracy * 100);
    if (!options.trainer_command.empty())
      std::printf(
          "--trainer-command: the model is the command's, so accuracy (of the averaged model) is not measured;\n"
          "site acc. and the times to %.1f%% come from the accuracies each trainer reported (meridian.Site.report).\n",
          options.target_accuracy * 100);
    if (options.stop_at_target)
      std::printf(
          "(stopped): --stop-at-target stopped these sites once every one had reached %.1f%%; their\n"
          "accuracy is the one at the stop.\n",
          options.target_accuracy * 100);
    std::printf("\n");
    std::printf("results  %s\ncurves   %s\nplot     %s\nlogs     %s/<algo>/<site>/log.txt\n",
                context.results_csv.c_str(), context.curves_csv.c_str(), context.plot_svg.c_str(), out_dir.c_str());
  }
  std::fflush(stdout);
  return 0;
}

}  // namespace

void add_simulate_command(CLI::App& app, int& exit_code, Invocation invocation) {
  auto* cmd = app.add_subcommand("simulate", "Train with N local sites and an emulated WAN; compare algorithms");
  cmd->footer(
      "Starts N real `meridian start` processes on 127.0.0.1 for each algorithm in turn (secure by default:\n"
      "keys and a roster are created in the output directory), emulates the WAN on their links, shows one\n"
      "live line, and prints a table: test accuracy of the averaged final model, seconds per step, time until\n"
      "every site reached --target-accuracy, bytes sent per site. Writes OUT/results.csv, OUT/curves.csv,\n"
      "OUT/accuracy.svg (accuracy against wall time) and every site's files in OUT/<algo>/<site>/.\n"
      "Every other option is passed to the sites as the `meridian start` option of the same name.\n\n"
      "Examples:\n"
      "  meridian simulate --sites 4 --algo allreduce,sgp --wan world4 --epochs 1\n"
      "  meridian simulate --sites 8 --algo dts,dsync --wan latency=100ms,bandwidth=50mbit --delay 2 --period 16\n"
      "  meridian simulate --sites 4 --algo allreduce,dts:delay=4:period=32:exchange=direct,sgp:tau=4 --wan world4\n"
      "  meridian simulate --sites 4 --algo allreduce,diloco,diloco:inner-steps=64:fragments=4:compression=int8 "
      "--epochs 2\n"
      "  meridian simulate --sites 4 --algo diloco,diloco-gossip,diloco-gossip:out-peers=2 --wan world4\n"
      "  meridian simulate --sites 4 --algo dts:delay=auto:exchange=direct,sgp:tau=auto,diloco --wan latency=100ms\n"
      "    (auto: shapes chosen from the measured round trip and step time; diloco's overlap is auto by default)\n"
      "  meridian simulate --sites 4 --algo sgp,dsync --partition dirichlet:0.5 --json > result.json\n"
      "  meridian simulate --sites 4 --algo allreduce,diloco --trainer-command 'python3 my_train.py'\n"
      "    (your own PyTorch script as every site's trainer: docs/pytorch.md)");
  auto options = std::make_shared<SimulationOptions>();
  options->site.epochs = 1;
  auto algo_list = std::make_shared<std::string>("allreduce,sgp");
  daemon::SiteConfig& s = options->site;

  cmd->add_option("--sites", options->sites, "Number of sites (processes)")->capture_default_str();
  cmd->add_option("--algo", *algo_list,
                  "Algorithms to compare, comma-separated: " + daemon::algorithms::algorithm_names() +
                      "; each may carry its own knobs: dts:delay=4:period=2 (" + algorithm_variant_knobs() + ")")
      ->capture_default_str();
  cmd->add_option("--out", options->out_dir, "Output directory (results, plot, logs)")->capture_default_str();
  cmd->add_option("--target-accuracy", options->target_accuracy, "Test accuracy for the 'time to' column, in (0, 1)")
      ->capture_default_str();
  cmd->add_flag("--stop-at-target", options->stop_at_target,
                "Stop an algorithm's sites once every one has reached --target-accuracy (time to accuracy without "
                "training to the end; its accuracy is then the one at the stop)");
  cmd->add_option("--eval-every", options->eval_every, "Steps between each site's test evaluations (the curves)")
      ->capture_default_str();
  cmd->add_option("--threads-per-site", options->threads_per_site, "Compute threads of each site")
      ->capture_default_str();
  cmd->add_option("--timeout", options->timeout_seconds, "Seconds one algorithm may take before its sites are stopped")
      ->capture_default_str();
  cmd->add_flag("--json", options->json, "Print the comparison as one JSON object on stdout");
  cmd->add_flag("--insecure", s.insecure, "No CurveZMQ keys: plain TCP between the sites");
  cmd->add_option(
         "--byzantine", options->byzantine_site,
         "Fault injection: this site index sends garbage instead of its vectors (-1 = none), e.g. --byzantine 7")
      ->capture_default_str();
  cmd->add_option("--byzantine-scale", options->byzantine_scale,
                  "RMS of the --byzantine site's garbage, in multiples of its honest vectors' RMS")
      ->capture_default_str();
  cmd->add_option("--data-cache", options->data_cache,
                  "Directory where gzip IDX files are unpacked once for all sites instead of by each site at its "
                  "start (none: each site unpacks them)")
      ->capture_default_str();
  cmd->add_option("--trainer-command", options->trainer_command,
                  "Your own training script as each site's trainer, e.g. 'python3 train.py --epochs 2': every site "
                  "runs attached (`meridian start --trainer attached`) and the command, run with `sh -c` beside it, "
                  "attaches with meridian.attach() (MERIDIAN_RUN_DIR, MERIDIAN_SITE_INDEX and MERIDIAN_SITE_COUNT "
                  "are set) and reports its test accuracy with site.report(); the data and model options are then "
                  "the command's own (docs/pytorch.md)");
  // Hidden: the tests run simulate's process handling against a stand-in for `meridian start`.
  cmd->add_option("--site-program", options->program, "The program each site runs (default: this meridian)")->group("");

  const std::string shared = "Passed to every site";
  cmd->add_option("--wan", s.wan, "Emulated links: world4 | latency=100ms,jitter=5ms,bandwidth=50mbit,loss=0.01")
      ->group(shared);
  cmd->add_option("--partition", s.partition, "iid | dirichlet:ALPHA (how the dataset is split)")
      ->capture_default_str()
      ->group(shared);
  cmd->add_option("--train", s.train,
                  "Training data split across the sites, format from the path: image folder, FILE.npz, "
                  "FEATURES.npy,LABELS.npy, FILE.csv, IDX (docs/datasets.md); replaces --dataset")
      ->group(shared);
  cmd->add_option("--site-train", options->site_train,
                  "Each site's own training data instead of a split: one path per site, in site order (repeat the "
                  "flag); the sites agree on classes and input scaling as real ones do")
      ->group(shared);
  cmd->add_option("--test", s.test, "With --train or --site-train: the test data every site evaluates on")
      ->group(shared);
  cmd->add_option("--classes", s.classes, "With --train: the class list a,b,c (default: from the data)")->group(shared);
  cmd->add_option("--layout", s.layout, "With --train: axis order of 4-D NumPy features: nchw | nhwc")->group(shared);
  cmd->add_option("--normalize", s.normalize,
                  "Input scaling, the same on every site: auto | federation | none (docs/datasets.md)")
      ->capture_default_str()
      ->group(shared);
  cmd->add_option("--input-mean", s.input_mean, "Given input scaling: each feature's or channel's mean, a,b,c")
      ->group(shared);
  cmd->add_option("--input-std", s.input_std, "Given input scaling: each feature's or channel's deviation, a,b,c")
      ->group(shared);
  cmd->add_option("--augment", s.augment, "Image augmentation: none | crop:N | flip | crop:N,flip")
      ->capture_default_str()
      ->group(shared);
  cmd->add_option("--dataset", s.dataset, "fashion-mnist | idx | csv (when --train is not given)")
      ->capture_default_str()
      ->group(shared);
  cmd->add_option("--data-dir", s.data_dir, "Directory of the IDX files")->capture_default_str()->group(shared);
  cmd->add_option("--train-csv", s.train_csv, "Deprecated: the old name of --train for a CSV file")->group(shared);
  cmd->add_option("--test-csv", s.test_csv, "Deprecated: the old name of --test for a CSV file")->group(shared);
  cmd->add_option("--label-column", s.label_column, "Tables: label column")->group(shared);
  cmd->add_option("--ignore-columns", s.ignore_columns, "Tables: columns to leave out, a,b (e.g. id,mrn)")
      ->group(shared);
  cmd->add_option("--categorical", s.categorical,
                  "Tables: category columns, one-hot encoded, a,b, each optionally with its list (ward=icu|surgery)")
      ->group(shared);
  cmd->add_flag("--missing-indicators", s.missing_indicators,
                "Tables: an input per numeric column that is 1 where the value was missing")
      ->group(shared);
  cmd->add_option("--model", s.model, "logreg | mlp | mlp-bn | cnn | resnet8 | resnet20, or a model file")
      ->capture_default_str()
      ->group(shared);
  cmd->add_option("--widths", s.widths, "Hidden widths of the mlp, e.g. 256,128 (the cnn's layers are fixed)")
      ->delimiter(',')
      ->group(shared);
  cmd->add_option("--epochs", s.epochs, "Epochs over each site's part (fractions allowed: 0.5)")
      ->capture_default_str()
      ->group(shared);
  cmd->add_option("--batch", s.batch, "Local batch size")->capture_default_str()->group(shared);
  cmd->add_option("--lr", s.lr, "Learning rate")->capture_default_str()->group(shared);
  cmd->add_option("--optimizer", s.optimizer, "sgd | momentum | nesterov | adam | adamw")
      ->capture_default_str()
      ->group(shared);
  cmd->add_option("--schedule", s.schedule, "constant | step:EPOCHS:FACTOR | cosine")
      ->capture_default_str()
      ->group(shared);
  cmd->add_option("--momentum", s.momentum, "Momentum coefficient")->capture_default_str()->group(shared);
  cmd->add_option("--weight-decay", s.weight_decay, "L2 weight decay")->capture_default_str()->group(shared);
  daemon::bind_shape_option(*cmd, "delay", s.delay,
                            "D, with delayed compensation (dts, dsync; sgp overlaps by --tau, diloco by --overlap), or "
                            "auto: chosen from the measured network (dts); dts without a delay or period runs D = 2, "
                            "P = 16")
      ->group(shared);
  cmd->add_option("--period", s.period, "P (dts; diloco's H is --inner-steps)")->capture_default_str()->group(shared);
  daemon::bind_algorithm_options(*cmd, s, shared);  // the options the algorithms declare for themselves
  cmd->add_option("--out-peers", s.out_peers, "K (sgp; diloco-gossip)")->capture_default_str()->group(shared);
  daemon::bind_shape_option(*cmd, "tau", s.tau, "tau (sgp overlap), or auto: chosen from the measured network")
      ->group(shared);
  cmd->add_option("--grid", s.grid, "dsync: auto | ROWSxCOLS (e.g. 2x2)")->capture_default_str()->group(shared);
  cmd->add_option("--reaverage-every", s.reaverage_every, "Steps between exact re-averages")
      ->capture_default_str()
      ->group(shared);
  daemon::bind_deadline_option(*cmd, "round-timeout", s.round_timeout,
                               "Seconds before a mixing round is abandoned and redone, or auto: from measured mixes")
      ->group(shared);
  // Many sites on few cores delay heartbeats by whole seconds: the knobs to keep them from being
  // declared dead falsely.
  cmd->add_option("--heartbeat-interval", s.heartbeat_interval, "Seconds between heartbeats")
      ->capture_default_str()
      ->group(shared);
  daemon::bind_deadline_option(*cmd, "heartbeat-timeout", s.heartbeat_timeout,
                               "Seconds of silence before a site is declared dead, or auto: from measured heartbeats")
      ->group(shared);
  cmd->add_flag("--robust-aggregation", s.robust_aggregation,
                "Byzantine-robust mixing on every site (trimmed mean, norm clipping; docs/reliability.md)")
      ->group(shared);
  cmd->add_flag("--secure-aggregation", s.secure_aggregation,
                "Masked shares on every site: peers see only exact means (docs/privacy.md; needs the keys simulate "
                "makes, so not with --insecure)")
      ->group(shared);
  // DP-SGD on every site, as `meridian start` takes it (daemon/site_config.cc has the full help).
  cmd->add_option("--dp-epsilon", s.dp_epsilon,
                  "DP-SGD on every site with this (epsilon, delta) budget; training stops before a step that would "
                  "exceed it (0 = no DP-SGD; docs/privacy.md)")
      ->capture_default_str()
      ->group(shared);
  cmd->add_option("--dp-delta", s.dp_delta, "DP-SGD: delta of the (epsilon, delta) guarantee")
      ->capture_default_str()
      ->group(shared);
  cmd->add_option("--dp-clip", s.dp_clip, "DP-SGD: each example's gradient is clipped to this L2 norm (required)")
      ->capture_default_str()
      ->group(shared);
  cmd->add_option("--dp-noise-multiplier", s.dp_noise_multiplier,
                  "DP-SGD: the noise multiplier given directly instead of from --dp-epsilon (0 = from --dp-epsilon)")
      ->capture_default_str()
      ->group(shared);
  cmd->add_option("--robust-clip", s.robust_clip, "Clip factor of --robust-aggregation")
      ->capture_default_str()
      ->group(shared);
  cmd->add_option("--robust-trim", s.robust_trim, "Trimmed-mean trim of --robust-aggregation")
      ->capture_default_str()
      ->group(shared);
  cmd->add_option("--seed", s.seed, "Random seed (initial model, partition, data order)")
      ->capture_default_str()
      ->group(shared);
  cmd->add_option("--device", s.device, "auto | cpu | cuda | cuda:N")->capture_default_str()->group(shared);

  cmd->callback([cmd, options, algo_list, &exit_code, invocation] {
    options->given.clear();
    for (const CLI::Option* option : cmd->get_options())
      if (option->count() > 0)
        for (const auto& name : option->get_lnames()) options->given.push_back(name);
    if (invocation == Invocation::kCheck) {
      options->algos = split_algorithm_list(*algo_list);
      check_simulation(*options);
      exit_code = 0;
      return;
    }
    try {
      exit_code = run_simulation(*options, *algo_list);
    } catch (const SimulationInterrupted& e) {
      std::fprintf(stderr, "meridian simulate: %s\n", e.what());
      exit_code = 130;
    } catch (const SimulationFailed& e) {
      std::fprintf(stderr, "meridian simulate: %s\n", e.what());
      exit_code = 1;
    }
  });
}

}  // namespace meridian::cli
