// The architectures Meridian trains: logistic regression, an MLP with configurable hidden widths (also
// with batch norm and dropout), a LeNet-style CNN, He et al.'s CIFAR ResNets, and any network a model file
// describes (model_file.h). Every site builds the same model from the same arguments and seed.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "models/model.h"

namespace meridian::models {

// Softmax regression: flatten, then one Linear(input → classes).
std::unique_ptr<Model> make_logreg(Shape input, std::size_t classes, std::shared_ptr<Backend> backend,
                                   std::uint64_t seed);
// Flatten, then Linear+ReLU for each hidden width, then Linear(→ classes). The default widths
// {256, 128} give 784-256-128-10 on 28×28 images.
std::unique_ptr<Model> make_mlp(Shape input, const std::vector<std::size_t>& hidden, std::size_t classes,
                                std::shared_ptr<Backend> backend, std::uint64_t seed);
// LeNet-style: conv5×5 (C→6, pad 2), ReLU, maxpool 2, conv5×5 (6→16), ReLU, maxpool 2, flatten,
// 400→120→84→classes with ReLU between (on 1×28×28 input). Throws error::UserError for images
// too small for the two 5×5 convolutions and pools.
std::unique_ptr<Model> make_cnn(Shape input, std::size_t classes, std::shared_ptr<Backend> backend, std::uint64_t seed);
// For tabular data: flatten, then Linear → BatchNorm1d → ReLU → Dropout(p) for each hidden width, then
// Linear(→ classes).
std::unique_ptr<Model> make_mlp_bn(Shape input, const std::vector<std::size_t>& hidden, float dropout,
                                   std::size_t classes, std::shared_ptr<Backend> backend, std::uint64_t seed);
// He et al.'s CIFAR ResNet with 6n + 2 layers: conv3×3 (→16) → batch norm → ReLU, three stages of n basic
// blocks (residual_network.h) with 16, 32 and 64 channels, the first block of the second and third stage
// with stride 2 and a projection shortcut, each block followed by ReLU, then global average pooling and
// Linear(64 → classes). n = 1 is resnet8, n = 3 resnet20. Any input of at least 1×1 pixels: 1×28×28
// gives stages of 28, 14 and 7 pixels a side, 3×32×32 of 32, 16 and 8.
std::unique_ptr<Model> make_resnet(std::size_t blocks_per_stage, Shape input, std::size_t classes,
                                   std::shared_ptr<Backend> backend, std::uint64_t seed);
// The built-in architectures' names, for messages and --help: "logreg, mlp, mlp-bn, cnn, resnet8, resnet20".
const std::vector<std::string>& builtin_models();
// By name: "logreg", "mlp" or "mlp-bn" (with `hidden`, empty for the default 256,128), "cnn", "resnet8",
// "resnet20"; anything else is the path of a model file (model_file.h). Throws error::UserError
// naming the unknown kind when no such file exists, and ModelFileError (an error::UserError) for a
// file that describes no valid network.
std::unique_ptr<Model> make_model(const std::string& kind, Shape input, std::size_t classes,
                                  const std::vector<std::size_t>& hidden, std::shared_ptr<Backend> backend,
                                  std::uint64_t seed);

}  // namespace meridian::models
