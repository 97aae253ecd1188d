// Writes an exported model as an ONNX file (opset 13, IR version 7) that takes raw inputs: the graph
// starts with the input standardization, when the model has one, so "input" is (N, C, H, W) images or
// (N, F) table rows as the training data held them, and "logits" is (N, classes).
//
// Layers map to ONNX operators: linear → Gemm, conv2d → Conv, batch_norm → BatchNormalization (running
// statistics), group_norm → Reshape + InstanceNormalization + Reshape + Mul + Add, max/avg_pool2d →
// MaxPool/AveragePool, global_avg_pool → GlobalAveragePool, flatten → Flatten, relu/tanh/sigmoid → their
// operators, gelu → x·½(1 + erf(x/√2)) (ONNX has no Gelu before opset 20), residual → its branches and
// Add, dropout → nothing (it is the identity at inference). Tensors between layers are (N, C) where a
// layer's shape is C×1×1 and (N, C, H, W) otherwise, with Reshape where a layer needs the other form.
// The model's metadata goes into the model's metadata_props.
#pragma once

#include <filesystem>

#include "models/interchange/exported_model.h"

namespace meridian::models::interchange {

// Writes `model` to `path`. Throws error::UserError naming the path when it cannot be written.
void write_onnx(const std::filesystem::path& path, const ExportedModel& model);

}  // namespace meridian::models::interchange
