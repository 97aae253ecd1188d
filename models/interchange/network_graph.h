// The network of a trained model as plain data, read from its fingerprint (Model::fingerprint), for
// writing it in other tools' formats (safetensors, ONNX). The fingerprint lists every layer with all its
// settings, so it describes every model Meridian trains: the built-ins and any model file.
//
// Each layer knows its input and output shape and where its parameters and state lie in the model's
// contiguous buffers (models/model.h: layer order; a residual block holds its body's, then its
// shortcut's). The folder is named interchange because `export` is a C++ keyword.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "error/error.h"
#include "models/shape.h"

namespace meridian::models::interchange {

// A fingerprint this reader cannot turn into a network; what() quotes the part it cannot read.
class NetworkGraphError : public error::UserError {
 public:
  using error::UserError::UserError;
};

struct LayerNode {
  // flatten, linear, conv2d, batch_norm, group_norm, relu, gelu, tanh, sigmoid, dropout, max_pool2d,
  // avg_pool2d, global_avg_pool or residual.
  std::string op;
  Shape input, output;
  std::size_t out_channels = 0;  // linear: output features; conv2d: output channels
  std::size_t kernel = 0;        // conv2d, pools: the square window's side
  std::size_t stride = 1;        // conv2d, pools
  std::size_t padding = 0;       // conv2d
  std::size_t groups = 0;        // group_norm
  float eps = 0.0f;              // batch_norm, group_norm
  float momentum = 0.0f;         // batch_norm (training only; kept for the description)
  float p = 0.0f;                // dropout (training only)
  // Where this layer's values lie in the model's parameter and state buffers.
  std::size_t parameter_offset = 0, parameter_count = 0;
  std::size_t state_offset = 0, state_count = 0;
  // residual: out = body(x) + shortcut(x); no shortcut layers means the identity.
  std::vector<LayerNode> body, shortcut;
};

struct NetworkGraph {
  std::string kind;  // "mlp", "cnn", a model file's name, ...
  Shape input;
  std::size_t classes = 0;
  std::vector<LayerNode> layers;
  std::size_t parameter_count = 0, state_count = 0;
};

// Reads "KIND|in=CxHxW|layer|...|classes=N|params=P[|state=S]", works out every layer's shapes and
// buffer offsets, and checks them against the stated classes, parameter and state counts. Throws
// NetworkGraphError naming the fingerprint and the part that is unknown or inconsistent.
NetworkGraph parse_network_graph(const std::string& fingerprint);

}  // namespace meridian::models::interchange
