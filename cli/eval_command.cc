// `meridian eval`: test accuracy and loss of a checkpoint, or of the average of several (the consensus
// model of a federation, push-sum weights de-biased, normalization statistics averaged too).
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "daemon/checkpoint/checkpoint_model.h"
#include "daemon/site_config.h"
#include "daemon/site_data.h"

namespace meridian::cli {
namespace {

struct EvalOptions {
  std::vector<std::string> checkpoints;
  std::string dataset = "fashion-mnist";
  std::string data_dir = "/usr/share/datasets/fashion-mnist";
  std::string train_csv, test_csv, label_column = "label";
  std::string train, test, classes, layout;
  std::string ignore_columns, categorical;  // tables: as the run gave them
  bool missing_indicators = false;
  bool json = false;
};

// A JSON string literal with every character that needs it escaped (control characters too).
std::string json_string(const std::string& s) { return nlohmann::json(s).dump(); }

int run_eval(const EvalOptions& o) {
  daemon::SiteConfig config;
  config.dataset = o.dataset;
  config.data_dir = o.data_dir;
  config.train_csv = o.train_csv;
  config.test_csv = o.test_csv;
  config.label_column = o.label_column;
  config.train = o.train;
  config.test = o.test;
  config.classes = o.classes;
  config.layout = o.layout;
  config.ignore_columns = o.ignore_columns;
  config.categorical = o.categorical;
  config.missing_indicators = o.missing_indicators;
  std::vector<std::filesystem::path> files(o.checkpoints.begin(), o.checkpoints.end());
  // The inputs are scaled as the model was trained (the federation's agreed scaling, kept in the
  // checkpoint), not with statistics of whichever file is at hand.
  // Its class list and table preprocessing, recorded in it, read the test data the way the federation
  // read its own, so only --test is needed.
  models::data::Standardization scaling;
  daemon::InputDescription trained;
  if (!files.empty()) {
    auto first = daemon::read_checkpoint_file(files.front());
    scaling = {std::move(first.input_mean), std::move(first.input_stddev)};
    trained = std::move(first.inputs);
  }
  const auto test = daemon::load_test_data(config, scaling, trained);
  const auto r = daemon::evaluate_checkpoints(files, test);
  if (o.json) {
    std::printf(
        "{\"checkpoints\": %zu, \"algorithm\": %s, \"step\": %llu, \"fingerprint\": %s, \"test_samples\": %zu, "
        "\"test_accuracy\": %.6f, \"test_loss\": %.6f}\n",
        r.checkpoints, json_string(r.algorithm).c_str(), static_cast<unsigned long long>(r.step),
        json_string(r.fingerprint).c_str(), r.evaluation.samples, r.evaluation.accuracy, r.evaluation.loss);
  } else {
    std::printf("test accuracy %.4f  loss %.4f  (%zu samples; %s%s, round %llu)\n", r.evaluation.accuracy,
                r.evaluation.loss, r.evaluation.samples,
                r.checkpoints > 1 ? ("average of " + std::to_string(r.checkpoints) + " checkpoints, ").c_str() : "",
                r.algorithm.c_str(), static_cast<unsigned long long>(r.step));
  }
  return 0;
}

}  // namespace

void add_eval_command(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<EvalOptions>();
  auto* cmd = app.add_subcommand("eval", "Test accuracy and loss of a checkpoint (or of several averaged)");
  cmd->footer(
      "Examples:\n"
      "  meridian eval --checkpoint meridian-run/checkpoints/checkpoint-00000000000000000936.mrdn\n"
      "  meridian eval --checkpoint runs/a/checkpoints/X.mrdn --checkpoint runs/b/checkpoints/Y.mrdn --json\n"
      "The model is rebuilt from the checkpoint's fingerprint; several checkpoints are averaged (sgp's\n"
      "push-sum numerators divided by their weights first; batch norm's running statistics with the\n"
      "parameters) and the average is evaluated.\n"
      "  meridian eval --checkpoint X.mrdn --test scans/test --classes benign,malignant\n"
      "--test takes the paths `meridian start` takes (docs/datasets.md). The checkpoint's class list and\n"
      "table preprocessing (label, ignored and category columns) apply to it; a checkpoint without them\n"
      "needs the run's --classes (or its --train, whose class list then applies) and table options. The\n"
      "inputs are scaled as the checkpoint says (the scaling its federation agreed on); only a checkpoint\n"
      "without one takes a CSV --train's scaling.");
  cmd->add_option("--checkpoint", o->checkpoints, "Checkpoint file (repeat to average several)")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->add_option("--dataset", o->dataset, "fashion-mnist | idx | csv")
      ->check(CLI::IsMember({"fashion-mnist", "idx", "csv"}))
      ->capture_default_str();
  cmd->add_option("--data-dir", o->data_dir, "IDX files for fashion-mnist and idx")->capture_default_str();
  cmd->add_option("--train-csv", o->train_csv, "Deprecated: the old name of --train for a CSV file");
  cmd->add_option("--test-csv", o->test_csv, "Deprecated: the old name of --test for a CSV file");
  cmd->add_option("--ignore-columns", o->ignore_columns, "Tables: the run's columns left out, a,b");
  cmd->add_option("--categorical", o->categorical, "Tables: the run's category columns, a,b=x|y");
  cmd->add_flag("--missing-indicators", o->missing_indicators, "Tables: the run had missing indicators");
  cmd->add_option("--label-column", o->label_column, "Tables: name or 0-based index of the label column")
      ->capture_default_str();
  cmd->add_option("--test", o->test,
                  "Test data by path (image folder, .npz, FEATURES.npy,LABELS.npy, .csv, IDX); replaces --dataset");
  cmd->add_option("--train", o->train, "With --test: the run's training data (its class list applies)");
  cmd->add_option("--classes", o->classes,
                  "With --test: the run's class list a,b,c (default: the checkpoint's, where it has one)");
  cmd->add_option("--layout", o->layout, "With --test: axis order of 4-D NumPy features: nchw | nhwc");
  cmd->add_flag("--json", o->json, "Print one JSON object");
  cmd->callback([o, &exit_code] { exit_code = run_eval(*o); });
}

}  // namespace meridian::cli
