// `meridian export`: a trained model in the formats other tools load, safetensors (for PyTorch, through
// python/meridian_torch.py) and ONNX, with the input standardization inside, so that the exported
// model takes raw inputs, and with the input and class names and a table's preprocessing recorded, so
// that a caller can feed it a raw CSV row (docs/export.md).
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "daemon/checkpoint/checkpoint.h"
#include "daemon/checkpoint/checkpoint_model.h"
#include "error/error.h"
#include "models/interchange/exported_model.h"
#include "models/interchange/onnx_file.h"
#include "models/interchange/safetensors_file.h"

namespace meridian::cli {
namespace {

struct ExportOptions {
  std::vector<std::string> checkpoints;
  bool average = false;
  std::string format;
  std::string out;
};

int run_export(const ExportOptions& o) {
  if (o.checkpoints.size() > 1 && !o.average) {
    throw error::UserError("export: " + std::to_string(o.checkpoints.size()) +
                           " checkpoints given: add --average to export the federation's averaged model, or give one");
  }
  std::vector<daemon::Checkpoint> checkpoints;
  for (const auto& file : o.checkpoints) checkpoints.push_back(daemon::read_checkpoint_file(file));
  const daemon::Checkpoint& first = checkpoints.front();
  // The sites agreed on one input scaling and wrote it into every checkpoint: an average over
  // checkpoints of different scalings would be a model of no one's inputs.
  for (std::size_t i = 1; i < checkpoints.size(); ++i) {
    if (checkpoints[i].input_mean != first.input_mean || checkpoints[i].input_stddev != first.input_stddev) {
      throw error::UserError(o.checkpoints[i] + ": its input scaling differs from " + o.checkpoints.front() +
                             "'s: average only the checkpoints of one federation");
    }
    if (checkpoints[i].inputs != first.inputs) {
      throw error::UserError(o.checkpoints[i] + ": its input and class names or table preprocessing differ from " +
                             o.checkpoints.front() + "'s: average only the checkpoints of one federation");
    }
  }
  // De-biased (an sgp checkpoint holds the push-sum numerator and its weight), and averaged over the
  // sites as `meridian eval` averages them (daemon/checkpoint/checkpoint_model.h).
  const std::string name = checkpoints.size() == 1 ? o.checkpoints.front()
                                                   : "the average of " + std::to_string(checkpoints.size()) +
                                                         " checkpoints";
  std::vector<float> parameters, state;
  try {
    parameters = daemon::average_parameters(checkpoints);
    state = daemon::average_model_state(checkpoints);
  } catch (const error::UserError& e) {
    throw error::UserError("export: " + std::string(e.what()));
  }
  models::interchange::ModelSource source;
  source.fingerprint = first.model_fingerprint;
  source.parameters = parameters;
  source.state = state;
  source.input_mean = first.input_mean;
  source.input_stddev = first.input_stddev;
  source.model_file = first.model_file;
  source.feature_names = first.inputs.feature_names;
  source.class_names = first.inputs.class_names;
  source.table = first.inputs.table;
  models::interchange::ExportedModel model;
  try {
    model = models::interchange::make_exported_model(source);
  } catch (const error::UserError& e) {
    throw error::UserError(name + ": " + e.what());
  }
  if (o.format == "safetensors") {
    models::interchange::write_safetensors(o.out, model);
  } else {
    models::interchange::write_onnx(o.out, model);
  }
  std::string included;
  if (!model.input_mean.empty()) included += ", input standardization included";
  if (!model.feature_names.empty() || !model.class_names.empty()) included += ", input and class names included";
  if (source.table) included += ", table preprocessing included";
  std::printf("exported %s (%s, %zu tensors%s) to %s as %s\n", name.c_str(), model.graph.kind.c_str(),
              model.tensors.size(), included.c_str(), o.out.c_str(), o.format.c_str());
  return 0;
}

}  // namespace

void add_export_command(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<ExportOptions>();
  auto* cmd = app.add_subcommand("export", "Write a checkpoint's model as safetensors (PyTorch) or ONNX");
  cmd->footer(
      "Examples:\n"
      "  meridian train --model cnn --epochs 1 --save cnn.mrdn\n"
      "  meridian export cnn.mrdn --format safetensors --out cnn.safetensors\n"
      "  meridian export cnn.mrdn --format onnx --out cnn.onnx\n"
      "  meridian export --average a/checkpoints/X.mrdn b/checkpoints/Y.mrdn --format onnx --out federation.onnx\n"
      "The exported model takes raw inputs (pixels in [0, 1], or the CSV columns as they are): the input\n"
      "standardization the model was trained with is part of it. Load a safetensors file into PyTorch with\n"
      "python/meridian_torch.py (docs/export.md).");
  // No ExistingFile check: reading the checkpoint names the file and what is wrong with it.
  cmd->add_option("checkpoint", o->checkpoints,
                  "Checkpoint file (meridian train --save, or meridian start's); several with --average")
      ->required();
  cmd->add_flag("--average", o->average,
                "Export the average of the checkpoints given (each site's final one): the federation's model, "
                "as meridian eval averages it");
  cmd->add_option("--format", o->format, "safetensors | onnx")
      ->required()
      ->check(CLI::IsMember({"safetensors", "onnx"}));
  cmd->add_option("--out", o->out, "The file to write")->required();
  cmd->callback([o, &exit_code] { exit_code = run_export(*o); });
}

}  // namespace meridian::cli
