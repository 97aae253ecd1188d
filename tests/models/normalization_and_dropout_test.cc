// Behaviour of the layers with a mode or state: batch norm's running statistics (training moves them,
// evaluation uses them, the model's state buffer holds them, batch-splitting threads keep them right),
// dropout's masks (seeded, reproducible, fresh per step, off in evaluation), and the built-in networks
// that use them learning a small problem.
#include <catch2/catch.hpp>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "error/error.h"
#include "models/batch_norm.h"
#include "models/cpu_backend.h"
#include "models/dropout.h"
#include "models/group_norm.h"
#include "models/linear.h"
#include "models/model.h"
#include "models/model_factory.h"
#include "models/optimizer.h"
#include "models/split_mix64.h"

using namespace meridian::models;

namespace {

std::vector<float> random_vector(std::size_t n, std::uint64_t seed, float bound = 1.0f, float offset = 0.0f) {
  SplitMix64 random(seed);
  std::vector<float> v(n);
  for (float& x : v) x = offset + random.uniform(bound);
  return v;
}

// linear(4->6), batch norm, dropout, linear(6->3): a small model with state and randomness.
std::unique_ptr<Model> small_model(std::uint64_t seed, float p = 0.5f) {
  std::vector<std::unique_ptr<Layer>> layers;
  layers.push_back(std::make_unique<Linear>(4, 6, InitScheme::he));
  layers.push_back(std::make_unique<BatchNorm>(Shape{6, 1, 1}));
  layers.push_back(std::make_unique<Dropout>(Shape{6, 1, 1}, p));
  layers.push_back(std::make_unique<Linear>(6, 3, InitScheme::xavier));
  return std::make_unique<Model>("small", std::move(layers), 3, std::make_shared<CpuBackend>(), seed);
}

}  // namespace

TEST_CASE("batch norm moves its running statistics in training and normalizes with them in evaluation",
          "[models][normalization][unit]") {
  CpuBackend backend;
  const Shape shape{2, 3, 1};  // 2 channels of 3 pixels
  BatchNorm layer(shape, 0.25f, 1e-5f);
  std::vector<float> params(4), grads(4), state(4);
  layer.bind(params, grads);
  layer.bind_state(state);
  SplitMix64 random(1);
  layer.initialize(random);
  CHECK(state == std::vector<float>{0.0f, 0.0f, 1.0f, 1.0f});
  const std::size_t batch = 2;
  const auto x = random_vector(batch * shape.size(), 2, 2.0f, 1.0f);
  std::vector<float> out(x.size());
  layer.reserve(backend, batch);
  layer.forward(backend, x.data(), out.data(), batch);
  for (std::size_t c = 0; c < 2; ++c) {
    // The six values of channel c: pixels 0..2 of sample 0, then of sample 1.
    double mean = 0.0, squares = 0.0;
    for (std::size_t b = 0; b < batch; ++b)
      for (std::size_t p = 0; p < 3; ++p) mean += x[b * 6 + c * 3 + p];
    mean /= 6.0;
    for (std::size_t b = 0; b < batch; ++b)
      for (std::size_t p = 0; p < 3; ++p) squares += std::pow(x[b * 6 + c * 3 + p] - mean, 2);
    INFO("channel " << c);
    CHECK(state[c] == Approx(0.25 * mean).epsilon(1e-5));
    CHECK(state[2 + c] == Approx(0.75 + 0.25 * squares / 5.0).epsilon(1e-5));  // unbiased variance
    const double first = (x[c * 3] - mean) / std::sqrt(squares / 6.0 + 1e-5);
    CHECK(out[c * 3] == Approx(first).epsilon(1e-4));
  }
  const std::vector<float> moved = state;
  layer.set_training(false);
  layer.forward(backend, x.data(), out.data(), batch);
  CHECK(state == moved);  // evaluation leaves them alone
  for (std::size_t c = 0; c < 2; ++c)
    CHECK(out[6 + c * 3] == Approx((x[6 + c * 3] - state[c]) / std::sqrt(state[2 + c] + 1e-5)).epsilon(1e-5));
}

TEST_CASE(
    "a model keeps running statistics in its state buffer, outside the parameters and the fingerprint's "
    "parameter count",
    "[models][normalization][unit]") {
  auto model = small_model(7);
  CHECK(model->parameter_count() == (4 * 6 + 6) + 2 * 6 + (6 * 3 + 3));
  REQUIRE(model->state_count() == 2 * 6);
  CHECK(model->fingerprint() ==
        "small|in=4x1x1|linear(4->6)|batch_norm1d(6,momentum=0.1,eps=1e-05)|dropout(0.5)|linear(6->3)|classes=3|"
        "params=63|state=12");
  std::vector<float> state(model->state_count());
  model->read_state(state);
  CHECK(std::vector<float>(state.begin(), state.begin() + 6) == std::vector<float>(6, 0.0f));
  CHECK(std::vector<float>(state.begin() + 6, state.end()) == std::vector<float>(6, 1.0f));

  const std::size_t batch = 8;
  const auto x = random_vector(batch * 4, 3);
  const std::vector<std::int32_t> labels{0, 1, 2, 0, 1, 2, 0, 1};
  model->forward_backward(x.data(), labels.data(), batch);
  model->read_state(state);
  CHECK(state[0] != 0.0f);

  // Evaluation depends on the state: other running statistics, other logits.
  const float* logits = model->forward(x.data(), batch);
  const std::vector<float> before(logits, logits + batch * 3);
  std::vector<float> shifted = state;
  for (std::size_t i = 0; i < 6; ++i) shifted[i] += 0.5f;
  model->write_state(shifted);
  const float* after = model->forward(x.data(), batch);
  CHECK(after[0] != before[0]);
  CHECK_THROWS_AS(model->write_state(std::vector<float>(5)), meridian::error::InternalError);
}

TEST_CASE("threads that split the batch leave the running means where one thread would",
          "[models][normalization][unit]") {
  auto one = small_model(9, 0.0f), two = small_model(9, 0.0f);
  two->set_threads(2);
  const std::size_t batch = 10;
  const auto x = random_vector(batch * 4, 4);
  const std::vector<std::int32_t> labels{0, 1, 2, 0, 1, 2, 0, 1, 2, 0};
  for (int step = 0; step < 3; ++step) {
    one->forward_backward(x.data(), labels.data(), batch);
    two->forward_backward(x.data(), labels.data(), batch);
  }
  std::vector<float> a(one->state_count()), b(two->state_count());
  one->read_state(a);
  two->read_state(b);
  for (std::size_t c = 0; c < 6; ++c) {
    INFO("channel " << c);
    CHECK(b[c] == Approx(a[c]).margin(1e-6).epsilon(1e-5));
    // Each half's variance misses the spread between the halves' means: the running variance is close,
    // not equal.
    CHECK(b[6 + c] == Approx(a[6 + c]).epsilon(0.2));
  }
}

TEST_CASE("dropout zeroes a fraction p, scales the rest, passes the same mask back, and is off in evaluation",
          "[models][dropout][unit]") {
  CpuBackend backend;
  const std::size_t n = 20000;
  const float p = 0.3f;
  Dropout layer({n, 1, 1}, p);
  SplitMix64 random(5);
  layer.initialize(random);
  const auto x = random_vector(n, 6, 1.0f, 2.0f);  // in [1, 3): never zero
  const auto dout = random_vector(n, 7);
  std::vector<float> out(n), din(n);
  layer.forward(backend, x.data(), out.data(), 1);
  layer.backward(backend, x.data(), out.data(), dout.data(), din.data(), 1);
  std::size_t dropped = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (out[i] == 0.0f) {
      ++dropped;
      CHECK(din[i] == 0.0f);
    } else {
      // Linear in its input: the gradient is the same scale, exactly.
      CHECK(out[i] == x[i] * (1.0f / (1.0f - p)));
      CHECK(din[i] == dout[i] * (1.0f / (1.0f - p)));
    }
  }
  CHECK(static_cast<double>(dropped) / n == Approx(p).margin(0.02));

  // A new mask at the next training forward.
  std::vector<float> next(n);
  layer.forward(backend, x.data(), next.data(), 1);
  CHECK(next != out);
  // Evaluation: the identity, both ways.
  layer.set_training(false);
  layer.forward(backend, x.data(), next.data(), 1);
  CHECK(next == x);
  layer.backward(backend, x.data(), next.data(), dout.data(), din.data(), 1);
  CHECK(din == dout);
}

TEST_CASE("dropout masks follow the model's seed and differ between batch-splitting threads",
          "[models][dropout][unit]") {
  const std::size_t batch = 8;
  const auto x = random_vector(batch * 4, 8);
  const std::vector<std::int32_t> labels{0, 1, 2, 0, 1, 2, 0, 1};
  auto losses = [&](std::uint64_t seed) {
    auto model = small_model(seed);
    std::vector<float> result;
    for (int step = 0; step < 3; ++step) result.push_back(model->forward_backward(x.data(), labels.data(), batch));
    return result;
  };
  CHECK(losses(11) == losses(11));
  CHECK(losses(11) != losses(12));

  // Same masks from the same seed also through clones on another stream: only the stream differs.
  CpuBackend backend;
  Dropout layer({64, 1, 1}, 0.5f);
  SplitMix64 random(13);
  layer.initialize(random);
  auto copy = layer.clone();
  std::vector<float> ones(64, 1.0f), a(64), b(64);
  layer.forward(backend, ones.data(), a.data(), 1);
  copy->forward(backend, ones.data(), b.data(), 1);
  CHECK(a == b);
  copy->set_stream(1);
  copy->forward(backend, ones.data(), b.data(), 1);
  layer.forward(backend, ones.data(), a.data(), 1);
  CHECK(a != b);
}

TEST_CASE("batch norm, group norm and dropout reject settings that mean nothing", "[models][normalization][unit]") {
  CHECK_THROWS_AS(BatchNorm(Shape{3, 1, 1}, 1.5f), meridian::error::UserError);
  CHECK_THROWS_AS(BatchNorm(Shape{3, 1, 1}, 0.1f, 0.0f), meridian::error::UserError);
  CHECK_THROWS_AS(GroupNorm(Shape{6, 2, 2}, 4), meridian::error::UserError);
  CHECK_THROWS_AS(GroupNorm(Shape{6, 2, 2}, 0), meridian::error::UserError);
  CHECK_THROWS_AS(Dropout(Shape{3, 1, 1}, 1.0f), meridian::error::UserError);
  CHECK_THROWS_AS(Dropout(Shape{3, 1, 1}, -0.1f), meridian::error::UserError);
}

namespace {

// `rows` 1×8×8 images of 4 classes: class k lights up quadrant k (value 1 plus noise), the rest is noise.
data::Dataset quadrant_images(std::size_t rows, std::uint64_t seed) {
  data::Dataset d;
  d.rows = rows;
  d.dim = 64;
  d.classes = 4;
  d.channels = 1;
  d.height = d.width = 8;
  d.features.resize(rows * 64);
  d.labels.resize(rows);
  SplitMix64 random(seed);
  for (std::size_t r = 0; r < rows; ++r) {
    const auto k = static_cast<std::size_t>(random.below(4));
    d.labels[r] = static_cast<std::int32_t>(k);
    for (std::size_t y = 0; y < 8; ++y)
      for (std::size_t x = 0; x < 8; ++x) {
        const bool lit = (y / 4) * 2 + x / 4 == k;
        d.features[r * 64 + y * 8 + x] = (lit ? 1.0f : 0.0f) + random.uniform(0.5f);
      }
  }
  return d;
}

}  // namespace

TEST_CASE("resnet8 and mlp-bn learn a small image problem and evaluate with their running statistics",
          "[models][normalization][training][unit]") {
  const data::Dataset train = quadrant_images(512, 21), test = quadrant_images(256, 22);
  for (const std::string kind : {"resnet8", "mlp-bn"}) {
    INFO(kind);
    auto backend = std::make_shared<CpuBackend>();
    auto model = make_model(kind, {1, 8, 8}, 4, {32, 16}, backend, 3);
    OptimizerConfig config;
    config.kind = OptimizerKind::momentum;
    ScheduleConfig schedule;
    schedule.base_lr = 0.05f;
    Optimizer optimizer(config, schedule, model->parameter_count(), backend);
    const std::size_t batch = 32;
    for (std::size_t step = 0; step < 64; ++step) {
      const std::size_t first = (step * batch) % train.rows;
      model->forward_backward(train.row(first), train.labels.data() + first, batch);
      optimizer.step(model->parameters(), model->gradients());
    }
    // Evaluation normalizes with the running statistics the 64 steps accumulated.
    CHECK(model->evaluate(test).accuracy > 0.9);
  }
}
