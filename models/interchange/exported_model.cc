#include "models/interchange/exported_model.h"

#include <nlohmann/json.hpp>

namespace meridian::models::interchange {
namespace {

using Json = nlohmann::json;

// Slices the buffers into the tensors of `layers`, whose names start with `prefix`.
void add_tensors(const std::vector<LayerNode>& layers, const std::string& prefix, const ModelSource& source,
                 std::vector<NamedTensor>& out) {
  for (std::size_t i = 0; i < layers.size(); ++i) {
    const LayerNode& node = layers[i];
    const std::string name = prefix + "layers." + std::to_string(i) + ".";
    const auto take = [&](std::span<const float> buffer, std::size_t& at, const std::string& tensor,
                          std::vector<std::int64_t> shape) {
      std::size_t n = 1;
      for (const auto d : shape) n *= static_cast<std::size_t>(d);
      const auto values = buffer.subspan(at, n);
      out.push_back({name + tensor, std::move(shape), std::vector<float>(values.begin(), values.end())});
      at += n;
    };
    std::size_t p = node.parameter_offset, s = node.state_offset;
    const auto in = static_cast<std::int64_t>(node.input.channels);
    const auto channels = static_cast<std::int64_t>(node.output.channels);
    if (node.op == "linear") {
      take(source.parameters, p, "weight", {channels, static_cast<std::int64_t>(node.input.size())});
      take(source.parameters, p, "bias", {channels});
    } else if (node.op == "conv2d") {
      const auto k = static_cast<std::int64_t>(node.kernel);
      take(source.parameters, p, "weight", {channels, in, k, k});
      take(source.parameters, p, "bias", {channels});
    } else if (node.op == "batch_norm" || node.op == "group_norm") {
      // γ then β; batch norm's state: running mean then running variance (models/batch_norm.h).
      take(source.parameters, p, "weight", {channels});
      take(source.parameters, p, "bias", {channels});
      if (node.op == "batch_norm") {
        take(source.state, s, "running_mean", {channels});
        take(source.state, s, "running_var", {channels});
      }
    } else if (node.op == "residual") {
      add_tensors(node.body, name + "body.", source, out);
      add_tensors(node.shortcut, name + "shortcut.", source, out);
    }
  }
}

Json shape_json(Shape s) { return Json::array({s.channels, s.height, s.width}); }

// The network as JSON, one object per layer with its settings: what python/meridian_torch.py builds from.
Json layers_json(const std::vector<LayerNode>& layers) {
  Json out = Json::array();
  for (const auto& node : layers) {
    Json j{{"op", node.op}, {"input", shape_json(node.input)}, {"output", shape_json(node.output)}};
    if (node.op == "linear" || node.op == "conv2d") j["out"] = node.out_channels;
    if (node.op == "conv2d" || node.op == "max_pool2d" || node.op == "avg_pool2d") {
      j["kernel"] = node.kernel;
      j["stride"] = node.stride;
    }
    if (node.op == "conv2d") j["padding"] = node.padding;
    if (node.op == "batch_norm") j["momentum"] = node.momentum;
    if (node.op == "batch_norm" || node.op == "group_norm") j["eps"] = node.eps;
    if (node.op == "group_norm") j["groups"] = node.groups;
    if (node.op == "dropout") j["p"] = node.p;
    if (node.op == "residual") {
      j["body"] = layers_json(node.body);
      j["shortcut"] = layers_json(node.shortcut);
    }
    out.push_back(std::move(j));
  }
  return out;
}

// The hidden widths of an MLP: every linear layer's output but the last.
// How a raw table row becomes the inputs, for a caller that holds rows as text (docs/export.md): the
// columns in input order with the value that fills a missing one (the mean the standardization was made
// from: the federation's pooled mean of the values present), the category lists, and the scaling.
Json preprocessing_json(const data::TableSchema& table, const std::vector<float>& mean,
                        const std::vector<float>& stddev) {
  Json numeric = Json::array();
  for (std::size_t i = 0; i < table.numeric.size(); ++i) {
    numeric.push_back({{"name", table.numeric[i]}, {"impute", mean.empty() ? Json(nullptr) : Json(mean[i])}});
  }
  Json categorical = Json::array();
  for (const auto& column : table.categorical) {
    categorical.push_back({{"name", column.name}, {"categories", column.categories}});
  }
  Json scaling = mean.empty() ? Json(nullptr) : Json{{"mean", mean}, {"stddev", stddev}};
  return Json{{"format", 1},
              {"label", table.label},
              {"ignored", table.ignored},
              {"missing_values", Json::array({"", "NA", "N/A", "NaN", "null", "None", "?"})},
              {"numeric", numeric},
              {"missing_indicators", table.missing_indicators},
              {"categorical", categorical},
              {"scaling", scaling}};
}

Json hidden_widths(const std::vector<LayerNode>& layers) {
  Json widths = Json::array();
  for (const auto& node : layers)
    if (node.op == "linear") widths.push_back(node.out_channels);
  if (!widths.empty()) widths.erase(widths.size() - 1);
  return widths;
}

}  // namespace

const NamedTensor& ExportedModel::tensor(const std::string& name) const {
  for (const auto& t : tensors)
    if (t.name == name) return t;
  throw error::InternalError("no tensor named '" + name + "' in the exported model");
}

ExportedModel make_exported_model(const ModelSource& source) {
  ExportedModel model;
  model.graph = parse_network_graph(source.fingerprint);
  const NetworkGraph& g = model.graph;
  if (source.parameters.size() != g.parameter_count || source.state.size() != g.state_count) {
    throw error::UserError("the model '" + source.fingerprint + "' has " + std::to_string(g.parameter_count) +
                           " parameters and " + std::to_string(g.state_count) + " state values, but " +
                           std::to_string(source.parameters.size()) + " and " + std::to_string(source.state.size()) +
                           " were given");
  }
  if (source.input_mean.size() != source.input_stddev.size() ||
      (!source.input_mean.empty() && source.input_mean.size() != g.input.size())) {
    throw error::UserError("the input standardization has " + std::to_string(source.input_mean.size()) + " means and " +
                           std::to_string(source.input_stddev.size()) + " standard deviations, the model takes " +
                           std::to_string(g.input.size()) + " input features");
  }
  if (!source.feature_names.empty() && source.feature_names.size() != g.input.size()) {
    throw error::UserError(std::to_string(source.feature_names.size()) + " input names were recorded, the model takes " +
                           std::to_string(g.input.size()) + " input features");
  }
  if (!source.class_names.empty() && source.class_names.size() != g.classes) {
    throw error::UserError(std::to_string(source.class_names.size()) + " class names were recorded, the model has " +
                           std::to_string(g.classes) + " classes");
  }
  if (source.table && source.table->width() != g.input.size()) {
    throw error::UserError("the recorded table preprocessing gives " + std::to_string(source.table->width()) +
                           " inputs, the model takes " + std::to_string(g.input.size()));
  }
  add_tensors(g.layers, "", source, model.tensors);
  model.input_mean.assign(source.input_mean.begin(), source.input_mean.end());
  model.input_stddev.assign(source.input_stddev.begin(), source.input_stddev.end());

  auto& m = model.metadata;
  m["format"] = "meridian-export-1";
  m["fingerprint"] = source.fingerprint;
  m["model"] = g.kind;
  if (!source.model_file.empty()) m["model_file"] = source.model_file;
  m["input_shape"] = shape_json(g.input).dump();
  m["classes"] = std::to_string(g.classes);
  if (g.kind == "mlp" || g.kind == "mlp-bn") m["hidden"] = hidden_widths(g.layers).dump();
  m["layers"] = layers_json(g.layers).dump();
  if (!model.input_mean.empty()) {
    m["input_mean"] = Json(model.input_mean).dump();
    m["input_stddev"] = Json(model.input_stddev).dump();
    m["inputs"] = "raw feature values (the CSV columns), standardized inside the model";
  } else {
    m["inputs"] = "as the model saw them in training (pixels in [0, 1] for images); no standardization is part of it";
  }
  model.feature_names = source.feature_names;
  model.class_names = source.class_names;
  if (!source.feature_names.empty()) m["feature_names"] = Json(source.feature_names).dump();
  if (!source.class_names.empty()) m["class_names"] = Json(source.class_names).dump();
  if (source.table) {
    model.impute_missing = !model.input_mean.empty();
    m["preprocessing"] = preprocessing_json(*source.table, model.input_mean, model.input_stddev).dump();
  }
  return model;
}

}  // namespace meridian::models::interchange
