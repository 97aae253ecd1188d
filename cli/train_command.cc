// `meridian train`: trains one model on this site alone (no network) and reports test accuracy.
// It is the single-site reference the distributed runs are compared with.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "daemon/checkpoint/checkpoint.h"
#include "daemon/site_config.h"
#include "error/error.h"
#include "models/data/data_source.h"
#include "models/data/feature_moments.h"
#include "models/data/image_augmentation.h"
#include "models/data/normalization_spec.h"
#include "models/data/idx_reader.h"
#include "daemon/backend/compute_backend.h"
#include "error/error.h"
#include "models/device.h"
#include "models/minibatcher.h"
#include "models/model_factory.h"
#include "models/optimizer.h"
#include "models/thread_policy.h"

namespace meridian::cli {
namespace {

struct TrainOptions {
  std::string dataset = "fashion-mnist";
  std::string data_dir = "/usr/share/datasets/fashion-mnist";
  std::string train, test, classes, layout, label_column = "label";
  std::string train_csv, test_csv;          // the deprecated names of --train and --test for CSV files
  std::string ignore_columns, categorical;  // tables, as start's (models/data/tabular_schema.h)
  bool missing_indicators = false;
  std::string augment = "none";  // as start's --augment (models/data/image_augmentation.h)
  // As start's: a federation of one agrees with itself (models/data/normalization_spec.h).
  std::string normalize = "auto", input_mean, input_std;
  std::string model = "mlp";
  std::vector<std::size_t> widths;
  double epochs = 5;
  std::size_t batch = 64;
  double lr = 0.0;  // 0: the optimizer's default
  // The same defaults as `meridian start`, so that a site's local baseline trains with the recipe its
  // federation uses unless asked otherwise.
  std::string optimizer = "momentum";
  double momentum = 0.9;
  double weight_decay = 0.0;
  std::string schedule = "constant";  // start's grammar (daemon::parse_schedule)
  double warmup_epochs = 0.0;
  // The old form `--schedule step` takes its decay from these (deprecated: step:EPOCHS:FACTOR says it).
  int decay_epochs = 2;
  double decay_factor = 0.1;
  int threads = 1;
  std::string device = "auto";
  std::uint64_t seed = 1;
  std::string save;  // checkpoint file for the final model; empty: none
  bool json = false;
};

// A JSON string literal with every character that needs it escaped (control characters too).
std::string json_string(const std::string& s) { return nlohmann::json(s).dump(); }

// The options that name data, checked together so that every mistake is reported at once, each
// naming its option. The same loader and options as `meridian start` (daemon/site_data.h); the old
// CSV options are folded into --train and --test first.
models::data::DataOptions data_options(TrainOptions& o) {
  auto fold = models::data::fold_legacy_csv_names(o.train, o.test, o.train_csv, o.test_csv);
  std::vector<std::string> problems = std::move(fold.problems);
  if (!fold.warning.empty()) std::fprintf(stderr, "train: warning: %s\n", fold.warning.c_str());
  models::data::DataOptions options;
  options.label_column = o.label_column;
  if (!o.train.empty() && o.dataset != "fashion-mnist" && o.dataset != "csv")
    problems.push_back("--dataset: '" + o.dataset + "' and --train both name the data: give one of them");
  if (o.train.empty()) {
    if (o.dataset != "fashion-mnist")
      problems.push_back("--dataset: '" + o.dataset + "' is not fashion-mnist (name other data with --train PATH)");
    for (const auto& [name, value] :
         {std::pair{"--test", &o.test}, std::pair{"--classes", &o.classes}, std::pair{"--layout", &o.layout}})
      if (!value->empty())
        problems.push_back(std::string(name) + ": applies with --train only (give the training data as --train PATH)");
  }
  for (const auto& [name, path] : {std::pair{"--train", &o.train}, std::pair{"--test", &o.test}}) {
    if (path->empty()) continue;
    try {
      (void)models::data::resolve_data_path(*path);
    } catch (const models::data::DataError& e) {
      problems.push_back(std::string(name) + ": " + e.what());
    }
  }
  try {
    if (!o.classes.empty()) options.class_names = models::data::parse_class_list(o.classes);
  } catch (const error::UserError& e) {
    problems.push_back(std::string("--classes: ") + e.what());
  }
  try {
    options.tabular = models::data::parse_tabular_spec(o.ignore_columns, o.categorical, o.missing_indicators);
  } catch (const error::UserError& e) {
    problems.push_back(e.what());
  }
  try {
    if (!o.layout.empty()) options.layout = models::data::parse_array_layout(o.layout);
  } catch (const error::UserError& e) {
    problems.push_back(std::string("--layout: ") + e.what());
  }
  try {
    (void)models::data::parse_normalization_spec(o.normalize, o.input_mean, o.input_std);
  } catch (const error::UserError& e) {
    problems.push_back(std::string(o.input_mean.empty() && o.input_std.empty() ? "--normalize: " : "--input-mean: ") +
                       e.what());
  }
  // Read unscaled: the scaling --normalize asks for is applied below, to both sets alike.
  options.standardize = false;
  try {
    (void)models::data::parse_augmentation_spec(o.augment);
  } catch (const error::UserError& e) {
    problems.push_back(std::string("--augment: ") + e.what());
  }
  if (!problems.empty()) {
    std::string text = "invalid options:";
    for (const auto& p : problems) text += "\n  " + p;
    throw error::UserError(text);
  }
  return options;
}

// Writes the final model as a checkpoint in the format `meridian start` writes (daemon/checkpoint/checkpoint.h),
// so that `meridian eval` and `meridian export` read it: parameters, batch norm's running statistics,
// the inputs' standardization (CSV data), the input and class names with the table preprocessing and,
// for a model file, its text.
void save_model(const TrainOptions& o, const models::Model& model, const models::data::Dataset& train,
                std::size_t steps) {
  std::vector<float> parameters(model.parameter_count()), state(model.state_count());
  model.read_parameters(parameters);
  if (!state.empty()) model.read_state(state);
  std::string model_file;
  const auto& builtins = models::builtin_models();
  if (std::find(builtins.begin(), builtins.end(), o.model) == builtins.end()) {
    std::ifstream in(o.model, std::ios::binary);
    model_file.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  daemon::CheckpointView view;
  view.parameters = parameters;
  view.step = steps;
  view.epoch = static_cast<std::uint64_t>(o.epochs);  // whole epochs completed
  view.model_fingerprint = model.fingerprint();
  view.algorithm = "train";
  view.model_state = state;
  view.input_mean = train.standardization.mean;
  view.input_stddev = train.standardization.stddev;
  view.model_file = model_file;
  view.inputs.feature_names = train.feature_names;
  view.inputs.class_names = train.class_names;
  view.inputs.table = train.table;
  if (const auto problem = daemon::write_checkpoint_file(o.save, view)) throw error::UserError("--save: " + *problem);
  std::fprintf(stderr, "train: saved the model to %s\n", o.save.c_str());
}

// --schedule in start's grammar (constant | cosine | step:EPOCHS:FACTOR), or the old `step` with
// --decay-epochs and --decay-factor, read for one more release with a warning.
daemon::ScheduleSpec schedule_spec(const TrainOptions& o) {
  if (o.schedule == "step") {
    char spelled[64];
    std::snprintf(spelled, sizeof spelled, "step:%d:%g", o.decay_epochs, o.decay_factor);
    std::fprintf(stderr,
                 "train: warning: --schedule step with --decay-epochs and --decay-factor is deprecated: use "
                 "--schedule %s, as `meridian start` takes it\n",
                 spelled);
    return daemon::ScheduleSpec{daemon::ScheduleSpec::Kind::kStep, o.decay_epochs, o.decay_factor};
  }
  if (const auto spec = daemon::parse_schedule(o.schedule)) return *spec;
  throw error::UserError("--schedule: '" + o.schedule +
                         "' is not constant, cosine or step:EPOCHS:FACTOR (e.g. step:2:0.5)");
}

int run_train(TrainOptions o) {
  using clock = std::chrono::steady_clock;
  const daemon::ScheduleSpec schedule = schedule_spec(o);
  const models::data::DataOptions data = data_options(o);
  // The device first: a --device cuda that cannot be honoured fails before the data is read.
  const models::DeviceSelection device = models::select_device(o.device);
  models::data::Dataset train, test;
  if (o.train.empty()) {
    train = models::data::load_fashion_mnist(o.data_dir, true);
    test = models::data::load_fashion_mnist(o.data_dir, false);
  } else {
    auto both = models::data::load_train_and_test(o.train, o.test, data);
    train = std::move(both.train);
    test = std::move(both.test);
  }
  const std::string data_name = o.train.empty() ? o.dataset : o.train;
  // Scaled as a federation of this one site would be: its own moments, or the values given.
  const auto normalization = models::data::parse_normalization_spec(o.normalize, o.input_mean, o.input_std);
  models::data::Standardization scaling;
  switch (models::data::normalization_source(normalization, train)) {
    case models::data::NormalizationSource::kFederation:
      scaling = models::data::standardization_from(models::data::moments_of(train), train);
      break;
    case models::data::NormalizationSource::kGiven:
      scaling = models::data::standardization_from(normalization.mean, normalization.stddev, train);
      break;
    case models::data::NormalizationSource::kNone:
    case models::data::NormalizationSource::kAuto:
      for (const auto& [part, path] : {std::pair{&train, &o.train}, std::pair{&test, &o.test}}) {
        if (const std::size_t missing = models::data::count_missing(part->features); missing > 0) {
          throw models::data::DataError(*path + ": has " + std::to_string(missing) +
                                        " missing values, and --normalize none leaves nothing to fill them with: "
                                        "use --normalize auto (they are filled with each column's mean)");
        }
      }
      break;
  }
  for (auto* part : {&train, &test}) {
    scaling.apply(part->features);
    part->standardization = scaling;
  }

  auto backend = daemon::make_backend(device.device);
  // A table (CSV, N×F arrays) has no geometry: the models see F features as F×1×1.
  const models::Shape input =
      train.channels > 0 ? models::Shape{train.channels, train.height, train.width} : models::Shape{train.dim, 1, 1};
  auto model = models::make_model(o.model, input, train.classes, o.widths, backend, o.seed);
  models::use_threads(*model, *backend, static_cast<std::size_t>(o.threads));

  // The same augmentation as start's trainer: drawn per (seed, epoch, row), applied while the batch is
  // gathered. Refused for a table before any training.
  const auto augment_spec = models::data::parse_augmentation_spec(o.augment);
  std::optional<models::data::ImageAugmentation> augmentation;
  try {
    if (augment_spec.enabled()) augmentation.emplace(train, augment_spec, o.seed + 2);
  } catch (const models::data::DataError& e) {
    throw models::data::DataError(std::string("--augment: ") + e.what());
  }
  std::vector<float> augmented(augmentation ? o.batch * train.dim : 0);    // (batch, dim)
  std::vector<std::int32_t> augmented_labels(augmentation ? o.batch : 0);  // (batch)

  models::Minibatcher batches(train, o.batch, o.seed + 1);
  const std::size_t steps_per_epoch = batches.batches_per_epoch();
  // Fractions of an epoch are allowed, as in `start`: the last epoch stops part of the way through.
  const std::size_t total_steps =
      std::max<std::size_t>(1, static_cast<std::size_t>(std::llround(o.epochs * static_cast<double>(steps_per_epoch))));
  const std::size_t epochs = (total_steps + steps_per_epoch - 1) / steps_per_epoch;
  char epochs_text[32];
  std::snprintf(epochs_text, sizeof epochs_text, "%g", o.epochs);

  models::OptimizerConfig opt;
  opt.kind = models::parse_optimizer_kind(o.optimizer);
  opt.momentum = static_cast<float>(o.momentum);
  opt.weight_decay = static_cast<float>(o.weight_decay);
  models::ScheduleConfig sched;
  switch (schedule.kind) {
    case daemon::ScheduleSpec::Kind::kConstant: sched.kind = models::ScheduleKind::constant; break;
    case daemon::ScheduleSpec::Kind::kStep: sched.kind = models::ScheduleKind::step; break;
    case daemon::ScheduleSpec::Kind::kCosine: sched.kind = models::ScheduleKind::cosine; break;
  }
  sched.base_lr = static_cast<float>(
      o.lr > 0.0
          ? o.lr
          : (opt.kind == models::OptimizerKind::adam || opt.kind == models::OptimizerKind::adamw ? 0.001 : 0.05));
  sched.warmup_steps = static_cast<std::uint64_t>(std::llround(o.warmup_epochs * static_cast<double>(steps_per_epoch)));
  sched.step_size = std::max<std::uint64_t>(1, static_cast<std::uint64_t>(schedule.step_epochs) * steps_per_epoch);
  sched.gamma = static_cast<float>(schedule.step_factor);
  sched.total_steps = std::max<std::uint64_t>(1, total_steps);
  models::Optimizer optimizer(opt, sched, model->parameters().size(), backend);

  std::fprintf(stderr,
               "train: %s on %s (%zu train, %zu test), %zu parameters, batch %zu%s%s, %s, lr %g %s, weight decay %g, "
               "%d thread(s), on %s (%s)\n",
               model->kind().c_str(), data_name.c_str(), train.rows, test.rows, model->parameters().size(), o.batch,
               augmentation ? ", augment " : "", augmentation ? augment_spec.to_string().c_str() : "",
               o.optimizer.c_str(), static_cast<double>(sched.base_lr), o.schedule.c_str(), o.weight_decay, o.threads,
               backend->name().c_str(), device.explanation.c_str());

  double train_seconds = 0.0;
  std::size_t samples = 0, step = 0;
  double last_loss = 0.0;
  models::Evaluation eval;
  for (std::size_t epoch = 1; epoch <= epochs; ++epoch) {
    const auto epoch_start = clock::now();
    auto last_print = epoch_start;
    double loss_sum = 0.0;
    std::size_t epoch_samples = 0, epoch_steps = 0;
    for (std::size_t n; step < total_steps && (n = batches.next()) > 0;) {
      const float* x = batches.features();
      const std::int32_t* y = batches.labels();
      if (augmentation) {
        augmentation->gather(batches.rows(), batches.epoch(), augmented.data(), augmented_labels.data());
        x = augmented.data();
        y = augmented_labels.data();
      }
      const float loss = model->forward_backward(x, y, n);
      if (!std::isfinite(loss))
        throw error::UserError("training diverged at step " + std::to_string(step) + " (loss " + std::to_string(loss) +
                               "); try a smaller --lr");
      optimizer.step(model->parameters(), model->gradients(), model->pool());
      loss_sum += loss * static_cast<double>(n);
      epoch_samples += n;
      ++epoch_steps;
      ++step;
      const auto now = clock::now();
      if (now - last_print > std::chrono::seconds(2)) {
        const double elapsed = std::chrono::duration<double>(now - epoch_start).count();
        std::fprintf(stderr, "epoch %zu/%zu step %zu/%zu loss %.4f samples/s %.0f\n", epoch, epochs, epoch_steps,
                     steps_per_epoch, loss_sum / static_cast<double>(epoch_samples),
                     static_cast<double>(epoch_samples) / elapsed);
        last_print = now;
      }
    }
    const double epoch_seconds = std::chrono::duration<double>(clock::now() - epoch_start).count();
    train_seconds += epoch_seconds;
    samples += epoch_samples;
    last_loss = loss_sum / static_cast<double>(epoch_samples);
    if (test.rows > 0) eval = model->evaluate(test);
    std::fprintf(stderr, "epoch %zu/%zu step %zu/%zu loss %.4f samples/s %.0f test accuracy %s\n", epoch, epochs,
                 epoch_steps, steps_per_epoch, last_loss, static_cast<double>(epoch_samples) / epoch_seconds,
                 test.rows > 0 ? std::to_string(eval.accuracy).c_str() : "- (no --test)");
  }
  if (!o.save.empty()) save_model(o, *model, train, step);
  const double samples_per_second = train_seconds > 0.0 ? static_cast<double>(samples) / train_seconds : 0.0;
  if (o.json) {
    std::printf(
        "{\"dataset\": %s, \"model\": %s, \"fingerprint\": %s, \"classes\": %zu, \"parameters\": %zu, \"epochs\": %s, "
        "\"batch\": %zu, "
        "\"optimizer\": %s, \"lr\": %g, \"weight_decay\": %g, \"schedule\": %s, \"threads\": %d, \"device\": %s, "
        "\"seed\": %llu, \"steps\": "
        "%zu, "
        "\"train_loss\": %.6f, \"test_samples\": %zu, \"test_loss\": %.6f, \"test_accuracy\": %.6f, \"train_seconds\": "
        "%.3f, "
        "\"samples_per_second\": %.1f}\n",
        json_string(data_name).c_str(), json_string(model->kind()).c_str(), json_string(model->fingerprint()).c_str(),
        model->classes(), model->parameters().size(), epochs_text, o.batch, json_string(o.optimizer).c_str(),
        static_cast<double>(sched.base_lr), o.weight_decay, json_string(o.schedule).c_str(), o.threads,
        json_string(backend->name()).c_str(), static_cast<unsigned long long>(o.seed), step, last_loss, test.rows,
        eval.loss, eval.accuracy, train_seconds, samples_per_second);
  } else if (test.rows > 0) {
    std::printf("test accuracy %.4f (%s, %s epochs, %.0f samples/s)\n", eval.accuracy, model->kind().c_str(),
                epochs_text, samples_per_second);
  } else {
    std::printf("train loss %.4f, no test accuracy: no --test given (%s, %s epochs, %.0f samples/s)\n", last_loss,
                model->kind().c_str(), epochs_text, samples_per_second);
  }
  return 0;
}

}  // namespace

void add_train_command(CLI::App& app, int& exit_code) {
  auto options = std::make_shared<TrainOptions>();
  CLI::App* cmd = app.add_subcommand("train", "Train a model on this site alone (no network) and report test accuracy");
  cmd->footer(
      "Example:\n"
      "  meridian train --dataset fashion-mnist --model cnn --epochs 5 --batch 64 --threads 2 --json\n"
      "  meridian train --model cnn --device cuda      # on GPU 0; fails with the reason where there is none\n"
      "  meridian train --train scans/train --test scans/test --classes benign,malignant --model cnn\n"
      "  meridian train --train site.npz --test test.npz --layout nhwc\n"
      "--train and --test take the same paths as `meridian start` (an image folder, .npz, FEATURES.npy,LABELS.npy,\n"
      ".csv or IDX; docs/datasets.md), read by the same loader, so a site can compute its local baseline.\n"
      "Progress (epoch, step, loss, samples/s) goes to stderr; the result (test accuracy, or one JSON object\n"
      "with --json) to stdout. The optimizer and schedule default to start's (momentum, constant); the\n"
      "accuracy figures in docs/models.md add --optimizer nesterov --schedule cosine.");
  cmd->add_option("--dataset", options->dataset, "Packaged dataset, used when --train is not given")
      ->capture_default_str();
  cmd->add_option(
      "--train", options->train,
      "Training data, format from the path: image folder, FILE.npz, FEATURES.npy,LABELS.npy, FILE.csv, IDX");
  cmd->add_option("--test", options->test, "With --train: test data in the same form (without it no test accuracy)");
  cmd->add_option("--classes", options->classes, "With --train: the class list a,b,c (default: from the data)");
  cmd->add_option("--layout", options->layout, "With --train: axis order of 4-D NumPy features: nchw | nhwc");
  cmd->add_option(
         "--augment", options->augment,
         "Image augmentation while training, as start's: none | crop:N | flip | crop:N,flip (e.g. crop:4,flip)")
      ->capture_default_str();
  cmd->add_option("--normalize", options->normalize,
                  "Input scaling, as start's: auto (this data's mean and deviation for tables, none for images) | "
                  "federation | none")
      ->capture_default_str();
  cmd->add_option("--input-mean", options->input_mean, "Given input scaling: each feature's or channel's mean, a,b,c");
  cmd->add_option("--input-std", options->input_std,
                  "Given input scaling: each feature's or channel's standard deviation, a,b,c");
  cmd->add_option("--train-csv", options->train_csv, "Deprecated: the old name of --train for a CSV file");
  cmd->add_option("--test-csv", options->test_csv, "Deprecated: the old name of --test for a CSV file");
  cmd->add_option("--ignore-columns", options->ignore_columns, "Tables: columns to leave out, a,b (e.g. id,mrn)");
  cmd->add_option("--categorical", options->categorical,
                  "Tables: category columns, one-hot encoded, a,b, each optionally with its list (ward=icu|surgery)");
  cmd->add_flag("--missing-indicators", options->missing_indicators,
                "Tables: an input per numeric column that is 1 where the value was missing");
  cmd->add_option("--label-column", options->label_column, "Tables: name or 0-based index of the label column")
      ->capture_default_str();
  cmd->add_option("--data-dir", options->data_dir, "Folder with the dataset's IDX files (gzip or raw)")
      ->capture_default_str();
  cmd->add_option("--model", options->model, "Architecture")
      ->check(CLI::IsMember(models::builtin_models()) | CLI::ExistingFile)
      ->capture_default_str();
  cmd->add_option("--widths,--hidden", options->widths,
                  "Hidden layer widths of the mlp, e.g. 256,128 (default 256,128; as start's --widths, which "
                  "--hidden also names)")
      ->delimiter(',');
  cmd->add_option("--epochs", options->epochs, "Passes over the training set (fractions allowed, e.g. 0.5)")
      ->check(CLI::Range(1e-6, 100000.0))
      ->capture_default_str();
  cmd->add_option("--batch", options->batch, "Mini-batch size")
      ->check(CLI::Range(std::size_t{1}, std::size_t{1} << 20))
      ->capture_default_str();
  cmd->add_option("--lr", options->lr, "Base learning rate (default 0.05, or 0.001 for adam and adamw)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--optimizer", options->optimizer, "Optimizer")
      ->check(CLI::IsMember({"sgd", "momentum", "nesterov", "adam", "adamw"}))
      ->capture_default_str();
  cmd->add_option("--momentum", options->momentum, "Momentum coefficient (momentum, nesterov)")
      ->check(CLI::Range(0.0, 0.999999))
      ->capture_default_str();
  cmd->add_option("--weight-decay", options->weight_decay, "L2 weight decay")->check(CLI::NonNegativeNumber);
  cmd->add_option("--schedule", options->schedule,
                  "Learning-rate schedule, as start's: constant | step:EPOCHS:FACTOR (e.g. step:2:0.5) | cosine")
      ->capture_default_str();
  cmd->add_option("--warmup-epochs", options->warmup_epochs, "Linear warm-up length in epochs (may be fractional)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--decay-epochs", options->decay_epochs,
                  "Deprecated, with --schedule step: decay every this many epochs (use --schedule step:EPOCHS:FACTOR)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--decay-factor", options->decay_factor,
                  "Deprecated, with --schedule step: multiply the rate by this (use --schedule step:EPOCHS:FACTOR)")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  cmd->add_option("--threads", options->threads, "Compute threads")->check(CLI::Range(1, 256))->capture_default_str();
  cmd->add_option("--device", options->device, std::string(models::kDeviceOptionHelp))->capture_default_str();
  cmd->add_option("--seed", options->seed, "Seed for initialization and batch order")->capture_default_str();
  cmd->add_flag("--json", options->json, "Print one JSON object with the result on stdout");
  cmd->add_option("--save", options->save,
                  "Write the final model to this checkpoint file (read by `meridian eval` and `meridian export`)");
  cmd->callback([options, &exit_code] { exit_code = run_train(*options); });
}

}  // namespace meridian::cli
