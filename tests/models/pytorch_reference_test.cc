// Small fixed networks (every layer kind but dropout, whose masks come from Meridian's own generator)
// against forward outputs, gradients and running statistics computed once with PyTorch in float64
// (reference/make_reference.py wrote reference/small_network.txt and normalized_network.txt). Needs no
// torch.
#include <catch2/catch.hpp>

#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "models/activation.h"
#include "models/average_pool2d.h"
#include "models/batch_norm.h"
#include "models/conv2d.h"
#include "models/cpu_backend.h"
#include "models/flatten.h"
#include "models/global_average_pool.h"
#include "models/group_norm.h"
#include "models/layer_sequence.h"
#include "models/linear.h"
#include "models/max_pool2d.h"
#include "models/model.h"
#include "models/relu.h"
#include "models/residual_block.h"
#include "tests/models/reference_arrays.h"
#include "tests/support/build_paths.h"

using namespace meridian::models;

namespace {

// The network of make_reference.py, layer for layer.
std::unique_ptr<Model> small_network() {
  std::vector<std::unique_ptr<Layer>> layers;
  layers.push_back(std::make_unique<Conv2d>(Shape{2, 6, 6}, 3, 3, 1, 1, InitScheme::he));
  layers.push_back(std::make_unique<Relu>(Shape{3, 6, 6}));
  layers.push_back(std::make_unique<MaxPool2d>(Shape{3, 6, 6}, 2, 2));
  layers.push_back(std::make_unique<Conv2d>(Shape{3, 3, 3}, 4, 2, 1, 0, InitScheme::he));
  layers.push_back(std::make_unique<Relu>(Shape{4, 2, 2}));
  layers.push_back(std::make_unique<Flatten>(Shape{4, 2, 2}));
  layers.push_back(std::make_unique<Linear>(16, 5, InitScheme::he));
  layers.push_back(std::make_unique<Relu>(Shape{5, 1, 1}));
  layers.push_back(std::make_unique<Linear>(5, 4, InitScheme::xavier));
  return std::make_unique<Model>("reference", std::move(layers), 4, std::make_shared<CpuBackend>(), 1);
}

// The network of make_reference.py's normalized_network(), layer for layer.
std::unique_ptr<Model> normalized_network() {
  std::vector<std::unique_ptr<Layer>> layers;
  auto add = [&](auto layer) { layers.push_back(std::move(layer)); };
  auto shape = [&] { return layers.back()->output_shape(); };
  add(std::make_unique<Conv2d>(Shape{3, 8, 8}, 4, 3, 1, 1, InitScheme::he));
  add(std::make_unique<BatchNorm>(shape()));
  add(std::make_unique<Relu>(shape()));
  {
    const Shape in = shape();
    std::vector<std::unique_ptr<Layer>> body;
    body.push_back(std::make_unique<Conv2d>(in, 4, 3, 1, 1, InitScheme::he));
    body.push_back(std::make_unique<BatchNorm>(in));
    body.push_back(std::make_unique<Relu>(in));
    body.push_back(std::make_unique<Conv2d>(in, 4, 3, 1, 1, InitScheme::he));
    body.push_back(std::make_unique<BatchNorm>(in, 0.3f, 1e-3f));
    add(std::make_unique<ResidualBlock>(std::make_unique<LayerSequence>(std::move(body)), nullptr));
  }
  add(std::make_unique<Relu>(shape()));
  {
    const Shape in = shape(), out{6, 4, 4};
    std::vector<std::unique_ptr<Layer>> body, shortcut;
    body.push_back(std::make_unique<Conv2d>(in, 6, 3, 2, 1, InitScheme::he));
    body.push_back(std::make_unique<BatchNorm>(out));
    body.push_back(std::make_unique<Relu>(out));
    body.push_back(std::make_unique<Conv2d>(out, 6, 3, 1, 1, InitScheme::he));
    body.push_back(std::make_unique<BatchNorm>(out));
    shortcut.push_back(std::make_unique<Conv2d>(in, 6, 1, 2, 0, InitScheme::he));
    shortcut.push_back(std::make_unique<BatchNorm>(out));
    add(std::make_unique<ResidualBlock>(std::make_unique<LayerSequence>(std::move(body)),
                                        std::make_unique<LayerSequence>(std::move(shortcut))));
  }
  add(std::make_unique<ActivationLayer>(shape(), Activation::gelu));
  add(std::make_unique<GroupNorm>(shape(), 3));
  add(std::make_unique<AveragePool2d>(shape(), 2, 2));
  add(std::make_unique<ActivationLayer>(shape(), Activation::tanh));
  add(std::make_unique<GlobalAveragePool>(shape()));
  add(std::make_unique<Linear>(6, 5, InitScheme::he));
  add(std::make_unique<BatchNorm>(shape()));
  add(std::make_unique<ActivationLayer>(shape(), Activation::sigmoid));
  add(std::make_unique<Linear>(5, 3, InitScheme::xavier));
  return std::make_unique<Model>("normalized", std::move(layers), 3, std::make_shared<CpuBackend>(), 1);
}

template <typename T>
std::vector<T> as(const std::vector<double>& v) {
  return std::vector<T>(v.begin(), v.end());
}

}  // namespace

TEST_CASE("a small network matches PyTorch's forward output, loss and gradients", "[models][reference][unit]") {
  auto ref = meridian::models::testing::read_reference_arrays(std::string(meridian::tests::source_dir()) +
                                                              "/tests/models/reference/small_network.txt");
  auto model = small_network();
  REQUIRE(model->parameters().size() == ref.at("parameters").size());
  const auto params = as<float>(ref.at("parameters"));
  std::copy(params.begin(), params.end(), model->parameters().begin());
  const auto x = as<float>(ref.at("input"));
  const auto labels = as<std::int32_t>(ref.at("labels"));
  const std::size_t batch = labels.size();

  const float* logits = model->forward(x.data(), batch);
  const auto& expected_logits = ref.at("logits");
  for (std::size_t i = 0; i < expected_logits.size(); ++i) {
    INFO("logit " << i);
    CHECK(logits[i] == Approx(expected_logits[i]).margin(1e-5).epsilon(1e-4));
  }
  const float loss = model->forward_backward(x.data(), labels.data(), batch);
  CHECK(loss == Approx(ref.at("loss")[0]).epsilon(1e-5));
  const auto& expected_grads = ref.at("gradients");
  const auto grads = model->gradients();
  for (std::size_t i = 0; i < expected_grads.size(); ++i) {
    INFO("gradient " << i);
    CHECK(grads[i] == Approx(expected_grads[i]).margin(1e-5).epsilon(1e-4));
  }
}

TEST_CASE(
    "batch norm, residual blocks, group norm, pooling and activations match PyTorch in training and "
    "evaluation",
    "[models][reference][unit]") {
  auto ref = meridian::models::testing::read_reference_arrays(std::string(meridian::tests::source_dir()) +
                                                              "/tests/models/reference/normalized_network.txt");
  auto model = normalized_network();
  REQUIRE(model->parameters().size() == ref.at("parameters").size());
  REQUIRE(model->state().size() == ref.at("state").size());
  model->write_parameters(as<float>(ref.at("parameters")));
  const auto x = as<float>(ref.at("input"));
  const auto labels = as<std::int32_t>(ref.at("labels"));
  const std::size_t batch = labels.size();

  // A training step: batch statistics, gradients, and running statistics moved once.
  const float loss = model->forward_backward(x.data(), labels.data(), batch);
  CHECK(loss == Approx(ref.at("loss")[0]).epsilon(1e-5));
  const auto& expected_grads = ref.at("gradients");
  const auto grads = model->gradients();
  for (std::size_t i = 0; i < expected_grads.size(); ++i) {
    INFO("gradient " << i);
    CHECK(grads[i] == Approx(expected_grads[i]).margin(2e-5).epsilon(1e-3));
  }
  const auto& expected_state = ref.at("state");
  const auto state = model->state();
  for (std::size_t i = 0; i < expected_state.size(); ++i) {
    INFO("running statistic " << i);
    CHECK(state[i] == Approx(expected_state[i]).margin(1e-5).epsilon(1e-4));
  }
  // Evaluation: the running statistics normalize.
  const float* logits = model->forward(x.data(), batch);
  const auto& expected_logits = ref.at("eval_logits");
  for (std::size_t i = 0; i < expected_logits.size(); ++i) {
    INFO("evaluation logit " << i);
    CHECK(logits[i] == Approx(expected_logits[i]).margin(1e-5).epsilon(1e-4));
  }
}
