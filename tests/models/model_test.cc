// The model's contiguous buffers, fingerprint, seeded initialization, buffer reuse, input checks,
// and that training actually learns.
#include <catch2/catch.hpp>

#include <cmath>
#include <memory>
#include <numeric>
#include <vector>

#include "error/error.h"
#include "models/cpu_backend.h"
#include "models/minibatcher.h"
#include "models/model_factory.h"
#include "models/optimizer.h"
#include "models/split_mix64.h"
#include "models/thread_policy.h"
#include "models/worker_pool.h"

using namespace meridian::models;
using meridian::models::data::Dataset;

namespace {

std::shared_ptr<Backend> cpu() { return std::make_shared<CpuBackend>(); }

// Two Gaussian-ish blobs per class in `dim` dimensions: learnable, but not trivially by one feature.
Dataset blobs(std::size_t rows, std::size_t dim, std::size_t classes, std::uint64_t seed) {
  SplitMix64 random(seed);
  std::vector<float> centers(classes * dim);
  for (float& c : centers) c = random.uniform(1.0f);
  Dataset d;
  d.rows = rows;
  d.dim = dim;
  d.classes = classes;
  d.channels = 1;
  d.height = 1;
  d.width = dim;
  d.features.resize(rows * dim);
  d.labels.resize(rows);
  for (std::size_t r = 0; r < rows; ++r) {
    const auto label = static_cast<std::int32_t>(random.below(classes));
    d.labels[r] = label;
    for (std::size_t j = 0; j < dim; ++j) d.features[r * dim + j] = centers[label * dim + j] + random.uniform(0.6f);
  }
  return d;
}

}  // namespace

TEST_CASE("parameters and gradients are one buffer with a contiguous view per layer", "[models][model][unit]") {
  auto model = make_cnn({1, 28, 28}, 10, cpu(), 7);
  // conv1 6·25+6, conv2 16·150+16, 400·120+120, 120·84+84, 84·10+10
  const std::size_t expected = 156 + 2416 + 48120 + 10164 + 850;
  CHECK(model->parameters().size() == expected);
  CHECK(model->gradients().size() == expected);
  const float* next = model->parameters().data();
  for (std::size_t i = 0; i < model->layer_count(); ++i) {
    auto view = model->layer_parameters(i);
    CHECK(view.size() == model->layer(i).parameter_count());
    if (view.empty()) continue;
    CHECK(view.data() == next);
    next += view.size();
  }
  CHECK(next == model->parameters().data() + expected);
}

TEST_CASE("the fingerprint names architecture and sizes", "[models][model][unit]") {
  auto a = make_mlp({1, 28, 28}, {256, 128}, 10, cpu(), 1);
  auto b = make_mlp({1, 28, 28}, {256, 128}, 10, cpu(), 2);
  auto c = make_mlp({1, 28, 28}, {256, 64}, 10, cpu(), 1);
  CHECK(a->fingerprint() == b->fingerprint());  // the seed is not architecture
  CHECK(a->fingerprint() != c->fingerprint());
  CHECK(a->fingerprint() ==
        "mlp|in=1x28x28|flatten|linear(784->256)|relu|linear(256->128)|relu|linear(128->10)|classes=10|params=235146");
  CHECK(make_cnn({1, 28, 28}, 10, cpu(), 1)->fingerprint().find("conv2d(1->6,k5,s1,p2)") != std::string::npos);
  CHECK(make_logreg({1, 28, 28}, 10, cpu(), 1)->parameters().size() == 7850);
}

TEST_CASE("the summary names the architecture in words: sizes between weighted layers and parameters",
          "[models][model][unit]") {
  CHECK(make_mlp({1, 28, 28}, {256, 128}, 10, cpu(), 1)->summary() == "mlp 784-256-128-10 (235,146 parameters)");
  CHECK(make_mlp({1, 28, 28}, {256, 64}, 10, cpu(), 1)->summary() == "mlp 784-256-64-10 (218,058 parameters)");
  CHECK(make_cnn({1, 28, 28}, 10, cpu(), 1)->summary() == "cnn 1x28x28-6x28x28-16x10x10-120-84-10 (61,706 parameters)");
  CHECK(make_logreg({1, 28, 28}, 10, cpu(), 1)->summary() == "logreg 784-10 (7,850 parameters)");
}

TEST_CASE("initialization is seeded: same seed same model, other seed other model", "[models][model][unit]") {
  auto a = make_cnn({1, 28, 28}, 10, cpu(), 42);
  auto b = make_cnn({1, 28, 28}, 10, cpu(), 42);
  auto c = make_cnn({1, 28, 28}, 10, cpu(), 43);
  CHECK(std::equal(a->parameters().begin(), a->parameters().end(), b->parameters().begin()));
  CHECK_FALSE(std::equal(a->parameters().begin(), a->parameters().end(), c->parameters().begin()));
  // He bound for conv1 is sqrt(6/25); biases start at zero.
  const auto conv1 = a->layer_parameters(0);
  const float bound = std::sqrt(6.0f / 25.0f);
  CHECK(std::all_of(conv1.begin(), conv1.begin() + 150, [&](float w) { return std::abs(w) <= bound; }));
  CHECK(std::all_of(conv1.begin() + 150, conv1.end(), [](float w) { return w == 0.0f; }));
}

TEST_CASE("steps reuse their buffers and give the same result twice", "[models][model][unit]") {
  auto model = make_cnn({1, 28, 28}, 10, cpu(), 3);
  SplitMix64 random(5);
  std::vector<float> x(16 * 784);
  for (float& v : x) v = random.uniform(1.0f);
  std::vector<std::int32_t> y(16);
  for (std::size_t i = 0; i < y.size(); ++i) y[i] = static_cast<std::int32_t>(i % 10);
  const float first = model->forward_backward(x.data(), y.data(), 16);
  const std::vector<float> grads(model->gradients().begin(), model->gradients().end());
  const float* logits = model->forward(x.data(), 16);
  // A smaller batch after a larger one runs in the same buffers.
  model->forward_backward(x.data(), y.data(), 8);
  CHECK(model->forward(x.data(), 16) == logits);
  const float again = model->forward_backward(x.data(), y.data(), 16);
  CHECK(first == again);
  CHECK(std::equal(grads.begin(), grads.end(), model->gradients().begin()));
}

TEST_CASE("models reject mismatched data", "[models][model][unit]") {
  auto model = make_mlp({1, 4, 4}, {8}, 3, cpu(), 1);
  Dataset wrong = blobs(10, 5, 3, 1);
  CHECK_THROWS_AS(model->evaluate(wrong), meridian::error::UserError);
  std::vector<float> x(16, 0.0f);
  std::vector<std::int32_t> bad{3};
  CHECK_THROWS_AS(model->forward_backward(x.data(), bad.data(), 1), meridian::error::UserError);
  CHECK_THROWS_AS(model->forward_backward(x.data(), bad.data(), 0), meridian::error::InternalError);
  CHECK_THROWS_AS(make_model("resnet", {1, 28, 28}, 10, {}, cpu(), 1), meridian::error::UserError);
  CHECK_THROWS_AS(make_cnn({1, 8, 8}, 10, cpu(), 1), meridian::error::UserError);
}

TEST_CASE("training learns a separable problem with every optimizer", "[models][model][training][unit]") {
  const Dataset train = blobs(2000, 16, 4, 11), test = blobs(500, 16, 4, 11);
  const auto kind = GENERATE(OptimizerKind::sgd, OptimizerKind::momentum, OptimizerKind::nesterov, OptimizerKind::adam);
  auto backend = cpu();
  auto model = make_mlp({1, 1, 16}, {32}, 4, backend, 9);
  const double before = model->evaluate(test).accuracy;
  OptimizerConfig config;
  config.kind = kind;
  ScheduleConfig schedule;
  schedule.base_lr = kind == OptimizerKind::adam ? 0.01f : 0.05f;
  Optimizer optimizer(config, schedule, model->parameters().size(), backend);
  Minibatcher batches(train, 32, 3);
  for (int epoch = 0; epoch < 3; ++epoch) {
    for (std::size_t n; (n = batches.next()) > 0;) {
      model->forward_backward(batches.features(), batches.labels(), n);
      optimizer.step(model->parameters(), model->gradients());
    }
  }
  const Evaluation after = model->evaluate(test);
  INFO("optimizer " << static_cast<int>(kind) << " accuracy before " << before << " after " << after.accuracy);
  CHECK(after.accuracy > 0.95);
  CHECK(after.samples == 500);
}

TEST_CASE("the minibatcher visits every row once per epoch, reproducibly", "[models][batch][unit]") {
  Dataset d = blobs(10, 2, 2, 1);
  for (std::size_t r = 0; r < d.rows; ++r) d.features[r * 2] = static_cast<float>(r);  // row id in feature 0
  auto epoch_order = [&](Minibatcher& batches) {
    std::vector<int> seen;
    for (std::size_t n; (n = batches.next()) > 0;) {
      CHECK(n <= 4);
      for (std::size_t i = 0; i < n; ++i) seen.push_back(static_cast<int>(batches.features()[i * 2]));
    }
    return seen;
  };
  Minibatcher a(d, 4, 77), b(d, 4, 77);
  CHECK(a.batches_per_epoch() == 3);
  const auto first = epoch_order(a);
  const auto second = epoch_order(a);
  CHECK(first == epoch_order(b));
  CHECK(first != second);  // a fresh permutation each epoch
  for (auto order : {first, second}) {
    std::sort(order.begin(), order.end());
    std::vector<int> all(10);
    std::iota(all.begin(), all.end(), 0);
    CHECK(order == all);
  }
  CHECK(a.epoch() == 2);
}

TEST_CASE("splitting a batch across threads gives the single-thread loss and gradients",
          "[models][model][threads][unit]") {
  const std::size_t threads = GENERATE(2, 3);
  const std::size_t batch = GENERATE(37, 64, 3);
  auto single = make_cnn({1, 28, 28}, 10, cpu(), 21);
  auto split = make_cnn({1, 28, 28}, 10, cpu(), 21);
  split->set_threads(threads);
  CHECK(split->threads() == threads);
  SplitMix64 random(8);
  std::vector<float> x(batch * 784);
  for (float& v : x) v = 0.5f + 0.5f * random.uniform(1.0f);
  std::vector<std::int32_t> y(batch);
  for (auto& label : y) label = static_cast<std::int32_t>(random.below(10));
  for (int step = 0; step < 2; ++step) {  // the second step runs in the buffers of the first
    const float expected = single->forward_backward(x.data(), y.data(), batch);
    const float got = split->forward_backward(x.data(), y.data(), batch);
    INFO("threads " << threads << " batch " << batch << " step " << step);
    CHECK(got == Approx(expected).epsilon(1e-5));
    const auto a = single->gradients(), b = split->gradients();
    std::size_t mismatches = 0;
    for (std::size_t i = 0; i < a.size(); ++i)
      if (std::abs(a[i] - b[i]) > 1e-5f + 1e-3f * std::abs(a[i])) ++mismatches;
    CHECK(mismatches == 0);
  }
}

TEST_CASE("the worker pool runs every index once and rethrows a task's exception", "[models][threads][unit]") {
  WorkerPool pool(3);
  std::vector<int> hits(3, 0);
  for (int round = 0; round < 50; ++round) pool.run([&](std::size_t i) { ++hits[i]; });
  CHECK(hits == std::vector<int>{50, 50, 50});
  CHECK_THROWS_AS(pool.run([](std::size_t i) {
    if (i == 2) throw std::runtime_error("task 2 failed");
  }),
                  std::runtime_error);
  pool.run([&](std::size_t i) { ++hits[i]; });  // still usable afterwards
  CHECK(hits == std::vector<int>{51, 51, 51});
}

TEST_CASE("the thread policy splits batches for CNNs and threads the GEMMs of GEMM-only models",
          "[models][threads][unit]") {
  auto backend = std::make_shared<CpuBackend>(1);
  auto cnn = make_cnn({1, 28, 28}, 10, backend, 1);
  use_threads(*cnn, *backend, 2);
  CHECK(cnn->threads() == 2);
  CHECK(backend->threads() == 1);
  auto mlp = make_mlp({1, 28, 28}, {32}, 10, backend, 1);
  use_threads(*mlp, *backend, 2);
  CHECK(mlp->threads() == 1);
  CHECK(backend->threads() == 2);
  backend->set_threads(1);
}
