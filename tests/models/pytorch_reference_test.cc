// A small fixed network (every layer kind) against forward outputs and gradients computed once with
// PyTorch in float64 (reference/make_reference.py wrote reference/small_network.txt). Needs no torch.
#include <catch2/catch.hpp>

#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "models/conv2d.h"
#include "models/cpu_backend.h"
#include "models/flatten.h"
#include "models/linear.h"
#include "models/max_pool2d.h"
#include "models/model.h"
#include "models/relu.h"

using namespace meridian::models;

namespace {

std::map<std::string, std::vector<double>> read_reference(const std::string& path) {
  std::ifstream in(path);
  REQUIRE(in.good());
  std::map<std::string, std::vector<double>> arrays;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream header(line);
    std::string name;
    std::size_t count = 0;
    header >> name >> count;
    std::vector<double> values(count);
    for (double& v : values) in >> v;
    REQUIRE(in.good());
    arrays[name] = std::move(values);
    std::getline(in, line);  // rest of the values line
  }
  return arrays;
}

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

template <typename T>
std::vector<T> as(const std::vector<double>& v) {
  return std::vector<T>(v.begin(), v.end());
}

}  // namespace

TEST_CASE("a small network matches PyTorch's forward output, loss and gradients", "[models][reference]") {
  auto ref = read_reference(std::string(MERIDIAN_SOURCE_DIR) + "/tests/models/reference/small_network.txt");
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
