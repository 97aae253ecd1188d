#include "models/interchange/onnx_file.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <vector>

#include "models/interchange/protobuf_wire.h"

// ONNX's messages are encoded here field by field with their official field numbers (onnx/onnx.proto)
// rather than generated from ONNX's schema: the writer needs a dozen fields of eight messages, and it
// writes only, so a copy of the schema with its generated code would be more to keep than this list.
namespace meridian::models::interchange {
namespace {

// Field numbers of the ONNX messages used (onnx/onnx.proto).
namespace model_proto {
constexpr std::uint32_t kIrVersion = 1, kProducerName = 2, kProducerVersion = 3, kGraph = 7, kOpsetImport = 8,
                        kMetadataProps = 14;
}
namespace opset_proto {
constexpr std::uint32_t kDomain = 1, kVersion = 2;
}
namespace entry_proto {
constexpr std::uint32_t kKey = 1, kValue = 2;
}
namespace graph_proto {
constexpr std::uint32_t kNode = 1, kName = 2, kInitializer = 5, kInput = 11, kOutput = 12;
}
namespace node_proto {
constexpr std::uint32_t kInput = 1, kOutput = 2, kName = 3, kOpType = 4, kAttribute = 5;
}
namespace attribute_proto {
constexpr std::uint32_t kName = 1, kF = 2, kI = 3, kInts = 8, kType = 20;
constexpr std::int64_t kFloat = 1, kInt = 2, kIntList = 7;  // AttributeType
}  // namespace attribute_proto
namespace tensor_proto {
constexpr std::uint32_t kDims = 1, kDataType = 2, kName = 8, kRawData = 9;
constexpr std::int64_t kFloat = 1, kInt64 = 7;  // DataType
}  // namespace tensor_proto
namespace value_info_proto {
constexpr std::uint32_t kName = 1, kType = 2, kDocString = 3;
}
namespace type_proto {
constexpr std::uint32_t kTensorType = 1;               // TypeProto.tensor_type
constexpr std::uint32_t kElemType = 1, kShape = 2;     // TypeProto.Tensor
constexpr std::uint32_t kDim = 1;                      // TensorShapeProto.dim
constexpr std::uint32_t kDimValue = 1, kDimParam = 2;  // TensorShapeProto.Dimension
}  // namespace type_proto

constexpr std::int64_t kIrVersion = 7;  // the IR version that opset 13 came with
constexpr std::int64_t kOpset = 13;

struct Attribute {
  std::string name;
  enum { kFloat, kInt, kInts } type;
  float f = 0.0f;
  std::int64_t i = 0;
  std::vector<std::int64_t> ints;
};

Attribute attr_float(std::string name, float f) { return {std::move(name), Attribute::kFloat, f, 0, {}}; }
Attribute attr_int(std::string name, std::int64_t i) { return {std::move(name), Attribute::kInt, 0.0f, i, {}}; }
Attribute attr_ints(std::string name, std::vector<std::int64_t> v) {
  return {std::move(name), Attribute::kInts, 0.0f, 0, std::move(v)};
}

// The graph under construction: nodes in execution order and the initializers (weights, constants).
class GraphBuilder {
 public:
  explicit GraphBuilder(const ExportedModel& model) : model_(model) {}

  // Adds a node computing op_type(inputs) into `output` (default: a fresh name); returns that name.
  std::string node(const std::string& op_type, const std::vector<std::string>& inputs,
                   const std::vector<Attribute>& attributes = {}, std::string output = {}) {
    if (output.empty()) output = op_type + "_" + std::to_string(count_++);
    ProtobufWriter n;
    for (const auto& in : inputs) n.bytes(node_proto::kInput, in);
    n.bytes(node_proto::kOutput, output).bytes(node_proto::kName, output).bytes(node_proto::kOpType, op_type);
    for (const auto& a : attributes) {
      ProtobufWriter w;
      w.bytes(attribute_proto::kName, a.name);
      switch (a.type) {
        case Attribute::kFloat:
          w.f32(attribute_proto::kF, a.f).varint(attribute_proto::kType, attribute_proto::kFloat);
          break;
        case Attribute::kInt:
          w.varint(attribute_proto::kI, a.i).varint(attribute_proto::kType, attribute_proto::kInt);
          break;
        case Attribute::kInts:
          for (const auto v : a.ints) w.varint(attribute_proto::kInts, v);
          w.varint(attribute_proto::kType, attribute_proto::kIntList);
          break;
      }
      n.message(node_proto::kAttribute, w);
    }
    graph_.message(graph_proto::kNode, n);
    return output;
  }

  // A float initializer; returns its name.
  std::string floats(const std::string& name, const std::vector<std::int64_t>& dims, const std::vector<float>& values) {
    ProtobufWriter t;
    for (const auto d : dims) t.varint(tensor_proto::kDims, d);
    t.varint(tensor_proto::kDataType, tensor_proto::kFloat).bytes(tensor_proto::kName, name);
    t.bytes(tensor_proto::kRawData,
            std::string_view(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float)));
    initializers_.message(graph_proto::kInitializer, t);
    return name;
  }
  // The model's tensor `name`, shaped `dims` (PyTorch's shape when empty).
  std::string weight(const std::string& name, std::vector<std::int64_t> dims = {}) {
    const NamedTensor& t = model_.tensor(name);
    return floats(name, dims.empty() ? t.shape : dims, t.values);
  }
  std::string scalar(float value) { return floats("const_" + std::to_string(count_++), {}, {value}); }
  // An int64 vector constant (Reshape's target shape).
  std::string int64s(const std::vector<std::int64_t>& values) {
    const std::string name = "shape_" + std::to_string(count_++);
    ProtobufWriter t;
    t.varint(tensor_proto::kDims, static_cast<std::int64_t>(values.size()));
    t.varint(tensor_proto::kDataType, tensor_proto::kInt64).bytes(tensor_proto::kName, name);
    t.bytes(tensor_proto::kRawData,
            std::string_view(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(std::int64_t)));
    initializers_.message(graph_proto::kInitializer, t);
    return name;
  }

  // Reshapes x (a value of shape `s`) to (N, C) when `flat`, else to (N, C, H, W); `rank` is its
  // current rank and is updated. Emits nothing when x has that form already.
  std::string to_rank(const std::string& x, int& rank, Shape s, int want) {
    if (rank == want) return x;
    rank = want;
    const auto c = static_cast<std::int64_t>(s.channels);
    if (want == 2) return node("Reshape", {x, int64s({0, static_cast<std::int64_t>(s.size())})});
    return node("Reshape",
                {x, int64s({0, c, static_cast<std::int64_t>(s.height), static_cast<std::int64_t>(s.width)})});
  }

  ProtobufWriter& graph() { return graph_; }
  const ProtobufWriter& initializers() const { return initializers_; }

 private:
  const ExportedModel& model_;
  ProtobufWriter graph_, initializers_;
  std::size_t count_ = 0;
};

// The form a value of shape s takes between layers: (N, C) for C×1×1, (N, C, H, W) otherwise.
int canonical_rank(Shape s) { return s.height * s.width == 1 ? 2 : 4; }

std::vector<std::int64_t> pair(std::size_t v) { return {static_cast<std::int64_t>(v), static_cast<std::int64_t>(v)}; }

// Emits `layers` (tensor names under `prefix`) applied to x of rank `rank`; returns the output in its
// canonical form.
std::string emit_layers(GraphBuilder& g, const std::vector<LayerNode>& layers, const std::string& prefix, std::string x,
                        int rank) {
  for (std::size_t i = 0; i < layers.size(); ++i) {
    const LayerNode& node = layers[i];
    const std::string name = prefix + "layers." + std::to_string(i) + ".";
    const auto c = static_cast<std::int64_t>(node.output.channels);
    if (node.op == "flatten") {
      x = g.node("Flatten", {x}, {attr_int("axis", 1)});
      rank = 2;
    } else if (node.op == "linear") {
      x = g.to_rank(x, rank, node.input, 2);
      x = g.node("Gemm", {x, g.weight(name + "weight"), g.weight(name + "bias")}, {attr_int("transB", 1)});
    } else if (node.op == "conv2d") {
      x = g.to_rank(x, rank, node.input, 4);
      x = g.node(
          "Conv", {x, g.weight(name + "weight"), g.weight(name + "bias")},
          {attr_ints("kernel_shape", pair(node.kernel)), attr_ints("strides", pair(node.stride)),
           attr_ints("pads", {static_cast<std::int64_t>(node.padding), static_cast<std::int64_t>(node.padding),
                              static_cast<std::int64_t>(node.padding), static_cast<std::int64_t>(node.padding)})});
    } else if (node.op == "batch_norm") {
      x = g.node("BatchNormalization",
                 {x, g.weight(name + "weight"), g.weight(name + "bias"), g.weight(name + "running_mean"),
                  g.weight(name + "running_var")},
                 {attr_float("epsilon", node.eps), attr_float("momentum", 1.0f - node.momentum)});
    } else if (node.op == "group_norm") {
      // ONNX has no GroupNormalization before opset 18: normalize each group as one instance of an
      // InstanceNormalization over (N, G, C/G·H·W), then scale and shift per channel.
      const auto groups = static_cast<std::int64_t>(node.groups);
      const auto grouped = g.node("Reshape", {x, g.int64s({0, groups, -1})});
      const auto normalized =
          g.node("InstanceNormalization",
                 {grouped, g.floats(name + "group_scale", {groups}, std::vector<float>(node.groups, 1.0f)),
                  g.floats(name + "group_shift", {groups}, std::vector<float>(node.groups, 0.0f))},
                 {attr_float("epsilon", node.eps)});
      rank = 3;
      x = g.to_rank(normalized, rank, node.input, canonical_rank(node.input));
      const std::vector<std::int64_t> per_channel =
          rank == 4 ? std::vector<std::int64_t>{c, 1, 1} : std::vector<std::int64_t>{c};
      x = g.node("Mul", {x, g.weight(name + "weight", per_channel)});
      x = g.node("Add", {x, g.weight(name + "bias", per_channel)});
    } else if (node.op == "relu" || node.op == "tanh" || node.op == "sigmoid") {
      x = g.node(node.op == "relu" ? "Relu" : node.op == "tanh" ? "Tanh" : "Sigmoid", {x});
    } else if (node.op == "gelu") {
      const auto erf = g.node("Erf", {g.node("Mul", {x, g.scalar(0.70710678118654752f)})});
      x = g.node("Mul", {g.node("Mul", {x, g.node("Add", {erf, g.scalar(1.0f)})}), g.scalar(0.5f)});
    } else if (node.op == "dropout") {
      continue;
    } else if (node.op == "max_pool2d" || node.op == "avg_pool2d") {
      x = g.to_rank(x, rank, node.input, 4);
      x = g.node(node.op == "max_pool2d" ? "MaxPool" : "AveragePool", {x},
                 {attr_ints("kernel_shape", pair(node.kernel)), attr_ints("strides", pair(node.stride))});
    } else if (node.op == "global_avg_pool") {
      x = g.to_rank(x, rank, node.input, 4);
      x = g.node("GlobalAveragePool", {x});
    } else if (node.op == "residual") {
      const std::string body = emit_layers(g, node.body, name + "body.", x, rank);
      const std::string shortcut =
          node.shortcut.empty() ? x : emit_layers(g, node.shortcut, name + "shortcut.", x, rank);
      rank = canonical_rank(node.output);
      x = g.node("Add", {body, shortcut});
      continue;
    }
    x = g.to_rank(x, rank, node.output, canonical_rank(node.output));
  }
  return x;
}

std::string join(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& name : names) out += (out.empty() ? "" : ", ") + name;
  return out;
}

ProtobufWriter value_info(const std::string& name, const std::vector<std::int64_t>& dims) {
  ProtobufWriter shape;
  ProtobufWriter batch;
  batch.bytes(type_proto::kDimParam, "N");
  shape.message(type_proto::kDim, batch);
  for (const auto d : dims) {
    ProtobufWriter dim;
    dim.varint(type_proto::kDimValue, d);
    shape.message(type_proto::kDim, dim);
  }
  ProtobufWriter tensor;
  tensor.varint(type_proto::kElemType, tensor_proto::kFloat).message(type_proto::kShape, shape);
  ProtobufWriter type;
  type.message(type_proto::kTensorType, tensor);
  ProtobufWriter info;
  info.bytes(value_info_proto::kName, name).message(value_info_proto::kType, type);
  return info;
}

}  // namespace

void write_onnx(const std::filesystem::path& path, const ExportedModel& model) {
  const NetworkGraph& net = model.graph;
  const Shape in = net.input;
  const int input_rank = canonical_rank(in);
  const std::vector<std::int64_t> sample_dims =
      input_rank == 2
          ? std::vector<std::int64_t>{static_cast<std::int64_t>(in.size())}
          : std::vector<std::int64_t>{static_cast<std::int64_t>(in.channels), static_cast<std::int64_t>(in.height),
                                      static_cast<std::int64_t>(in.width)};
  GraphBuilder g(model);
  std::string x = "input";
  if (!model.input_mean.empty()) {
    const std::string mean = g.floats("input_mean", sample_dims, model.input_mean);
    // A table's missing value (NaN) takes its column's mean, as in Meridian: 0 after the scaling.
    if (model.impute_missing) x = g.node("Where", {g.node("IsNaN", {x}), mean, x});
    x = g.node("Sub", {x, mean});
    x = g.node("Div", {x, g.floats("input_stddev", sample_dims, model.input_stddev)});
  }
  x = emit_layers(g, net.layers, "", x, input_rank);
  // The last value is renamed through Identity so that the output's name is stable.
  const std::string logits = g.node("Identity", {x}, {}, "logits");

  ProtobufWriter& graph = g.graph();
  graph.bytes(graph_proto::kName, net.kind);
  // The names, where known, go with the input and the output (and into metadata_props with the rest).
  ProtobufWriter input = value_info("input", sample_dims);
  if (!model.feature_names.empty()) input.bytes(value_info_proto::kDocString, "features: " + join(model.feature_names));
  graph.message(graph_proto::kInput, input);
  ProtobufWriter output = value_info(logits, {static_cast<std::int64_t>(net.classes)});
  if (!model.class_names.empty()) output.bytes(value_info_proto::kDocString, "classes: " + join(model.class_names));
  graph.message(graph_proto::kOutput, output);
  std::string graph_bytes = graph.data() + g.initializers().data();

  ProtobufWriter opset;
  opset.bytes(opset_proto::kDomain, "").varint(opset_proto::kVersion, kOpset);
  ProtobufWriter file;
  file.varint(model_proto::kIrVersion, kIrVersion)
      .bytes(model_proto::kProducerName, "meridian")
      .bytes(model_proto::kProducerVersion, model.metadata.at("format"))
      .bytes(model_proto::kGraph, graph_bytes)
      .message(model_proto::kOpsetImport, opset);
  for (const auto& [key, value] : model.metadata) {
    ProtobufWriter entry;
    entry.bytes(entry_proto::kKey, key).bytes(entry_proto::kValue, value);
    file.message(model_proto::kMetadataProps, entry);
  }
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(file.data().data(), static_cast<std::streamsize>(file.data().size()));
  out.close();
  if (!out) throw error::UserError(path.string() + ": cannot write: " + std::strerror(errno));
}

}  // namespace meridian::models::interchange
