// The architectures Meridian trains: logistic regression, an MLP with configurable hidden widths and
// a LeNet-style CNN. Every site builds the same model from the same arguments and seed.
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
// 400→120→84→classes with ReLU between (on 1×28×28 input). Throws std::invalid_argument for images
// too small for the two 5×5 convolutions and pools.
std::unique_ptr<Model> make_cnn(Shape input, std::size_t classes, std::shared_ptr<Backend> backend,
                                std::uint64_t seed);
// By name: "logreg", "mlp" (with `hidden`, empty for the default) or "cnn".
// Throws std::invalid_argument naming the unknown kind.
std::unique_ptr<Model> make_model(const std::string& kind, Shape input, std::size_t classes,
                                  const std::vector<std::size_t>& hidden, std::shared_ptr<Backend> backend,
                                  std::uint64_t seed);

}  // namespace meridian::models
