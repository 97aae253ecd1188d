// A trained model ready to be written in another tool's format: its network (network_graph.h), its
// weights as named tensors, the standardization of its inputs, and a description to store with it.
//
// Tensor names are those of the PyTorch module that python/meridian_torch.py rebuilds (its state_dict):
// PREFIX + "weight" | "bias" | "running_mean" | "running_var", where PREFIX is "layers.I." for layer I of
// the network and, inside residual block PREFIX, PREFIX + "body.layers.J." or PREFIX + "shortcut.layers.J.".
// Shapes are PyTorch's: linear (out, in), conv2d (out, in, k, k), the others (C).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "models/data/tabular_schema.h"
#include "models/interchange/network_graph.h"

namespace meridian::models::interchange {

struct NamedTensor {
  std::string name;
  std::vector<std::int64_t> shape;
  std::vector<float> values;  // row-major, shape's product many
};

// What a model is exported from (a checkpoint's contents, borrowed).
struct ModelSource {
  std::string fingerprint;              // Model::fingerprint()
  std::span<const float> parameters;    // the de-biased parameter buffer
  std::span<const float> state;         // the state buffer (batch norm's running statistics)
  std::span<const float> input_mean;    // standardization x' = (x - mean) / stddev of the inputs, one per
  std::span<const float> input_stddev;  // input feature (empty: the model takes its inputs as they are)
  std::string model_file;               // the model file's text, for a model not built in
  std::vector<std::string> feature_names;  // one per input feature, in order; empty when unnamed
  std::vector<std::string> class_names;    // one per class; empty when unnamed
  std::optional<data::TableSchema> table;  // how a raw table row becomes the inputs (tabular_schema.h)
};

struct ExportedModel {
  NetworkGraph graph;
  std::vector<NamedTensor> tensors;  // in layer order
  std::vector<float> input_mean, input_stddev;
  std::vector<std::string> feature_names, class_names;  // as in ModelSource
  // A table's model: a missing input (NaN) is filled with its mean before the standardization, as
  // Meridian fills it, so the value reaches the network as 0.
  bool impute_missing = false;
  // String metadata stored with the weights (format, fingerprint, model, model_file, input_shape,
  // classes, hidden, layers, input_mean, input_stddev, inputs, and where known feature_names,
  // class_names and preprocessing; docs/export.md); values are text or JSON.
  std::map<std::string, std::string> metadata;

  // The tensor named `name`; throws error::InternalError when there is none (a writer bug).
  const NamedTensor& tensor(const std::string& name) const;
};

// Reads the network from the fingerprint and slices the buffers into tensors. Throws NetworkGraphError
// for an unreadable fingerprint and error::UserError when the buffers' sizes differ from what the
// network holds, the standardization does not have one mean and one deviation per input feature, or
// the names are not one per input feature and one per class.
ExportedModel make_exported_model(const ModelSource& source);

}  // namespace meridian::models::interchange
