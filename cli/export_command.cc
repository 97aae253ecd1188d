// `meridian export`: a trained model in the formats other tools load, safetensors (for PyTorch, through
// python/meridian_torch.py) and ONNX, with the input standardization inside, so that the exported
// model takes raw inputs (docs/export.md).
#include <cstdio>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "daemon/checkpoint.h"
#include "daemon/checkpoint_model.h"
#include "error/error.h"
#include "models/interchange/exported_model.h"
#include "models/interchange/onnx_file.h"
#include "models/interchange/safetensors_file.h"

namespace meridian::cli {
namespace {

struct ExportOptions {
  std::string checkpoint;
  std::string format;
  std::string out;
};

int run_export(const ExportOptions& o) {
  const daemon::Checkpoint checkpoint = daemon::read_checkpoint_file(o.checkpoint);
  // De-biased (an sgp checkpoint holds the push-sum numerator and its weight).
  const std::vector<float> parameters = daemon::average_parameters(std::span(&checkpoint, 1));
  models::interchange::ModelSource source;
  source.fingerprint = checkpoint.model_fingerprint;
  source.parameters = parameters;
  source.state = checkpoint.model_state;
  source.input_mean = checkpoint.input_mean;
  source.input_stddev = checkpoint.input_stddev;
  source.model_file = checkpoint.model_file;
  models::interchange::ExportedModel model;
  try {
    model = models::interchange::make_exported_model(source);
  } catch (const error::UserError& e) {
    throw error::UserError(o.checkpoint + ": " + e.what());
  }
  if (o.format == "safetensors") {
    models::interchange::write_safetensors(o.out, model);
  } else {
    models::interchange::write_onnx(o.out, model);
  }
  std::printf("exported %s (%s, %zu tensors%s) to %s as %s\n", o.checkpoint.c_str(), model.graph.kind.c_str(),
              model.tensors.size(), model.input_mean.empty() ? "" : ", input standardization included", o.out.c_str(),
              o.format.c_str());
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
      "The exported model takes raw inputs (pixels in [0, 1], or the CSV columns as they are): the input\n"
      "standardization the model was trained with is part of it. Load a safetensors file into PyTorch with\n"
      "python/meridian_torch.py (docs/export.md).");
  // No ExistingFile check: reading the checkpoint names the file and what is wrong with it.
  cmd->add_option("checkpoint", o->checkpoint, "Checkpoint file (meridian train --save, or meridian start's)")
      ->required();
  cmd->add_option("--format", o->format, "safetensors | onnx")
      ->required()
      ->check(CLI::IsMember({"safetensors", "onnx"}));
  cmd->add_option("--out", o->out, "The file to write")->required();
  cmd->callback([o, &exit_code] { exit_code = run_export(*o); });
}

}  // namespace meridian::cli
