// The CPU backend as the owner of a model's memory: zeroed buffers that grow and never shrink, the
// host copies behind Model::read/write_parameters and Optimizer::read/write_state, and the daemon's host
// mirror, which on the CPU must be the model's own buffers (so the CPU path copies nothing).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <numeric>
#include <stdexcept>
#include <vector>

#include "daemon/backend/host_mirror.h"
#include "error/error.h"
#include "models/backend_buffer.h"
#include "models/cpu_backend.h"
#include "models/model_factory.h"
#include "models/optimizer.h"

using namespace meridian::models;

TEST_CASE("CPU backend buffers start zeroed and grow without shrinking", "[models][memory][unit]") {
  CpuBackend backend;
  CHECK(backend.host_addressable());
  BackendBuffer<float> buffer(backend, 5);
  REQUIRE(buffer.size() == 5);
  CHECK(std::all_of(buffer.span().begin(), buffer.span().end(), [](float v) { return v == 0.0f; }));
  buffer.data()[4] = 3.0f;
  const float* before = buffer.data();
  buffer.reserve(backend, 3);
  CHECK(buffer.data() == before);
  CHECK(buffer.data()[4] == 3.0f);
  buffer.reserve(backend, 9);
  CHECK(buffer.size() == 9);
  CHECK(std::all_of(buffer.span().begin(), buffer.span().end(), [](float v) { return v == 0.0f; }));
  BackendBuffer<std::int32_t> empty(backend, 0);
  CHECK(empty.empty());
  CHECK(empty.data() == nullptr);
}

TEST_CASE("model parameters and optimizer state copy to and from the host", "[models][memory][unit]") {
  auto backend = std::make_shared<CpuBackend>(1);
  auto model = make_mlp({4, 1, 1}, {3}, 2, backend, 1);
  std::vector<float> values(model->parameter_count());
  std::iota(values.begin(), values.end(), 1.0f);
  model->write_parameters(values);
  CHECK(std::equal(values.begin(), values.end(), model->parameters().begin()));
  std::vector<float> back(values.size());
  model->read_parameters(back);
  CHECK(back == values);
  std::vector<float> wrong(values.size() + 1);
  CHECK_THROWS_AS(model->write_parameters(wrong), meridian::error::InternalError);
  CHECK_THROWS_AS(model->read_parameters(wrong), meridian::error::InternalError);

  OptimizerConfig config;
  config.kind = OptimizerKind::adam;
  Optimizer optimizer(config, ScheduleConfig{}, model->parameter_count(), backend);
  std::vector<float> state(2 * model->parameter_count(), 0.25f);
  optimizer.write_state(state);
  CHECK(optimizer.state()[0] == 0.25f);
  std::vector<float> state_back(state.size());
  optimizer.read_state(state_back);
  CHECK(state_back == state);
  CHECK_THROWS_AS(optimizer.write_state(values), meridian::error::InternalError);
}

TEST_CASE("on the CPU the daemon's host mirror is the model's own buffers", "[models][memory][daemon][unit]") {
  auto backend = std::make_shared<CpuBackend>(1);
  auto model = make_logreg({1, 4, 4}, 3, backend, 1);
  meridian::daemon::HostMirror mirror(*model);
  CHECK_FALSE(mirror.mirrored());
  CHECK(mirror.parameters().data() == model->parameters().data());
  CHECK(mirror.gradients().data() == model->gradients().data());
  // What the trainer writes through the view is what the model computes with, pull or push: with every
  // parameter zero the logits are zero, so the loss is ln(classes) whatever the batch.
  std::fill(mirror.parameters().begin(), mirror.parameters().end(), 0.0f);
  mirror.pull_parameters();  // no copy: must not overwrite what was written through the view
  mirror.push_parameters();
  const std::vector<float> x(2 * 16, 1.0f);
  const std::vector<std::int32_t> labels{0, 2};
  CHECK(model->forward_backward(x.data(), labels.data(), 2) == Approx(std::log(3.0f)));
  // The step's gradients are in the view at once, without a pull: the bias gradient of class 1, which
  // neither row has, is the mean softmax output 1/3.
  const std::size_t bias_of_class_1 = 16 * 3 + 1;
  CHECK(mirror.gradients()[bias_of_class_1] == Approx(1.0f / 3.0f));
  mirror.pull_gradients();
  CHECK(mirror.gradients()[bias_of_class_1] == Approx(1.0f / 3.0f));
}

TEST_CASE("a model on the CPU splits a step over threads in its own buffers", "[models][memory][unit]") {
  auto backend = std::make_shared<CpuBackend>(1);
  auto single = make_cnn({1, 12, 12}, 2, backend, 1);
  auto model = make_cnn({1, 12, 12}, 2, backend, 1);
  const float* parameters = model->parameters().data();
  const float* gradients = model->gradients().data();
  model->set_threads(2);
  CHECK(model->threads() == 2);
  CHECK_THROWS_AS(model->set_threads(0), meridian::error::UserError);
  CHECK(model->threads() == 2);

  // The two row ranges share the model's parameters and combine into its gradients (no second copy),
  // and the step is the single-thread one up to float summation order.
  std::vector<float> x(8 * 144);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 13) / 13.0f;
  const std::vector<std::int32_t> labels{0, 1, 1, 0, 1, 0, 0, 1};
  const float expected = single->forward_backward(x.data(), labels.data(), 8);
  CHECK(model->forward_backward(x.data(), labels.data(), 8) == Approx(expected).epsilon(1e-5));
  CHECK(model->parameters().data() == parameters);
  CHECK(model->gradients().data() == gradients);
  const auto want = single->gradients(), got = model->gradients();
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    INFO("gradient " << i);
    CHECK(got[i] == Approx(want[i]).epsilon(1e-3).margin(1e-5));
  }
}
