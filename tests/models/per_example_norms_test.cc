// Per-example gradient norms and DP-SGD's clipped gradient sum against brute force: one backward pass
// per example, whose parameter gradient is that example's own, its norm taken directly.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "error/error.h"
#include "models/batch_norm.h"
#include "models/conv2d.h"
#include "models/cpu_backend.h"
#include "models/flatten.h"
#include "models/group_norm.h"
#include "models/layer_sequence.h"
#include "models/linear.h"
#include "models/max_pool2d.h"
#include "models/model.h"
#include "models/per_example_norms.h"
#include "models/relu.h"
#include "models/residual_block.h"
#include "models/split_mix64.h"

using namespace meridian::models;

namespace {

std::vector<float> random_vector(std::size_t n, SplitMix64& random, float bound = 1.0f) {
  std::vector<float> v(n);
  for (float& x : v) x = random.uniform(bound);
  return v;
}

double squared_norm(const std::vector<float>& v) {
  double sum = 0.0;
  for (float x : v) sum += static_cast<double>(x) * x;
  return sum;
}

// The layer bound to random parameters, fed a random batch and random output gradients: the norms its
// tracking backward pass adds up must equal the norms of the gradients of one-example backward passes,
// and its din must equal an ordinary backward pass's.
void check_norms(Layer& layer, std::size_t batch, std::uint64_t seed) {
  CpuBackend backend;
  SplitMix64 random(seed);
  std::vector<float> params(layer.parameter_count()), grads(layer.parameter_count());
  layer.bind(params, grads);
  layer.initialize(random);
  for (float& p : params) p += random.uniform(0.1f);
  layer.reserve(backend, batch);
  const std::size_t in = layer.input_shape().size(), out = layer.output_shape().size();
  const std::vector<float> x = random_vector(batch * in, random), dout = random_vector(batch * out, random);
  std::vector<float> y(batch * out), din(batch * in), din_tracked(batch * in);

  layer.forward(backend, x.data(), y.data(), batch);
  layer.backward(backend, x.data(), y.data(), dout.data(), din.data(), batch);
  std::vector<double> norms(batch, 0.0);
  REQUIRE(layer.track_per_example_norms(norms.data()));
  layer.forward(backend, x.data(), y.data(), batch);
  layer.backward(backend, x.data(), y.data(), dout.data(), din_tracked.data(), batch);
  REQUIRE(layer.track_per_example_norms(nullptr));
  for (std::size_t i = 0; i < din.size(); ++i) {
    INFO(layer.describe() << " din " << i);
    CHECK(din_tracked[i] == Approx(din[i]).margin(1e-5));
  }

  std::vector<float> one_din(in);
  for (std::size_t b = 0; b < batch; ++b) {
    layer.forward(backend, x.data() + b * in, y.data(), 1);
    layer.backward(backend, x.data() + b * in, y.data(), dout.data() + b * out, one_din.data(), 1);
    INFO(layer.describe() << " example " << b);
    CHECK(norms[b] == Approx(squared_norm(grads)).epsilon(1e-4));
  }
}

Shape image(std::size_t c, std::size_t h, std::size_t w) { return {c, h, w}; }

std::unique_ptr<ResidualBlock> group_norm_block(Shape in, std::size_t channels, std::size_t stride) {
  std::vector<std::unique_ptr<Layer>> body;
  body.push_back(std::make_unique<Conv2d>(in, channels, 3, stride, 1, InitScheme::he));
  const Shape out = body.back()->output_shape();
  body.push_back(std::make_unique<GroupNorm>(out, 2));
  body.push_back(std::make_unique<Relu>(out));
  body.push_back(std::make_unique<Conv2d>(out, channels, 3, 1, 1, InitScheme::he));
  body.push_back(std::make_unique<GroupNorm>(out, 2));
  std::unique_ptr<LayerSequence> shortcut;
  if (!(out == in)) {
    std::vector<std::unique_ptr<Layer>> projection;
    projection.push_back(std::make_unique<Conv2d>(in, channels, 1, stride, 0, InitScheme::he));
    projection.push_back(std::make_unique<GroupNorm>(projection.back()->output_shape(), 2));
    shortcut = std::make_unique<LayerSequence>(std::move(projection));
  }
  return std::make_unique<ResidualBlock>(std::make_unique<LayerSequence>(std::move(body)), std::move(shortcut));
}

}  // namespace

TEST_CASE("per-example norms of a linear layer equal one backward pass per example", "[models][dp][unit]") {
  Linear layer(7, 5, InitScheme::he);
  check_norms(layer, 6, 1);
}

TEST_CASE("per-example norms of a convolution equal one backward pass per example", "[models][dp][unit]") {
  SECTION("padded, stride 1") {
    Conv2d layer(image(2, 8, 8), 4, 3, 1, 1, InitScheme::he);
    check_norms(layer, 5, 2);
  }
  SECTION("strided, no padding") {
    Conv2d layer(image(3, 9, 9), 6, 3, 2, 0, InitScheme::he);
    check_norms(layer, 4, 3);
  }
}

TEST_CASE("both ways to a convolution's per-example norms agree with its per-example gradients",
          "[models][dp][unit]") {
  // Small images and wide filters favour the Gram way, large images the materialized one; each is
  // forced here on both geometries and compared with the gradient of one example's backward pass.
  const auto method = GENERATE(ConvolutionNorms::Method::materialized, ConvolutionNorms::Method::gram);
  const auto [in, out_channels, kernel, stride, padding] =
      GENERATE(std::make_tuple(image(2, 10, 10), std::size_t{3}, std::size_t{3}, std::size_t{1}, std::size_t{1}),
               std::make_tuple(image(16, 4, 4), std::size_t{32}, std::size_t{3}, std::size_t{1}, std::size_t{0}));
  CpuBackend backend;
  SplitMix64 random(4);
  Conv2d layer(in, out_channels, kernel, stride, padding, InitScheme::he);
  std::vector<float> params(layer.parameter_count()), grads(layer.parameter_count());
  layer.bind(params, grads);
  layer.initialize(random);
  const ConvGeometry g{in.channels, in.height, in.width, kernel, stride, padding};
  ConvolutionNorms norms(g, out_channels, method);
  const std::size_t batch = 3, n_in = in.size(), n_out = layer.output_shape().size();
  const auto x = random_vector(batch * n_in, random), dout = random_vector(batch * n_out, random);
  std::vector<double> squared(batch, 0.0);
  norms.add(backend, batch, x.data(), dout.data(), squared.data());
  std::vector<float> y(n_out);
  for (std::size_t b = 0; b < batch; ++b) {
    layer.forward(backend, x.data() + b * n_in, y.data(), 1);
    layer.backward(backend, x.data() + b * n_in, y.data(), dout.data() + b * n_out, nullptr, 1);
    CHECK(squared[b] == Approx(squared_norm(grads)).epsilon(1e-4));
  }
}

TEST_CASE("the cheaper way is chosen for a convolution's per-example norms", "[models][dp][unit]") {
  // 28x28 output pixels against 6 filters of 25 taps: materializing costs 6·25·784, the Grams 784²·31.
  CHECK(ConvolutionNorms({1, 28, 28, 5, 1, 2}, 6).method() == ConvolutionNorms::Method::materialized);
  // 4x4 output pixels against 64 filters of 576 taps: the Grams are 16² · 640, far below 64·576·16.
  CHECK(ConvolutionNorms({64, 4, 4, 3, 1, 1}, 64).method() == ConvolutionNorms::Method::gram);
}

TEST_CASE("per-example norms of group normalization equal one backward pass per example", "[models][dp][unit]") {
  GroupNorm layer(image(4, 5, 5), 2);
  check_norms(layer, 5, 5);
}

TEST_CASE("per-example norms of residual blocks add up their branches", "[models][dp][unit]") {
  SECTION("identity shortcut") {
    auto block = group_norm_block(image(4, 6, 6), 4, 1);
    check_norms(*block, 3, 6);
  }
  SECTION("projection shortcut") {
    auto block = group_norm_block(image(2, 6, 6), 4, 2);
    check_norms(*block, 3, 7);
  }
}

TEST_CASE("batch norm cannot give per-example norms, nor can a sequence or block holding it", "[models][dp][unit]") {
  BatchNorm norm(image(3, 4, 4));
  std::vector<double> squared(2);
  CHECK_FALSE(norm.track_per_example_norms(squared.data()));
  std::vector<std::unique_ptr<Layer>> layers;
  layers.push_back(std::make_unique<Conv2d>(image(3, 4, 4), 3, 3, 1, 1, InitScheme::he));
  layers.push_back(std::make_unique<BatchNorm>(image(3, 4, 4)));
  LayerSequence sequence(std::move(layers));
  CHECK_FALSE(sequence.track_per_example_norms(squared.data()));
}

namespace {

std::unique_ptr<Model> small_cnn(std::shared_ptr<Backend> backend, bool batch_norm) {
  std::vector<std::unique_ptr<Layer>> layers;
  const Shape in = image(1, 8, 8);
  layers.push_back(std::make_unique<Conv2d>(in, 4, 3, 1, 1, InitScheme::he));
  if (batch_norm) layers.push_back(std::make_unique<BatchNorm>(image(4, 8, 8)));
  else layers.push_back(std::make_unique<GroupNorm>(image(4, 8, 8), 2));
  layers.push_back(std::make_unique<Relu>(image(4, 8, 8)));
  layers.push_back(group_norm_block(image(4, 8, 8), 4, 1));
  layers.push_back(std::make_unique<MaxPool2d>(image(4, 8, 8), 2, 2));
  layers.push_back(std::make_unique<Flatten>(image(4, 4, 4)));
  layers.push_back(std::make_unique<Linear>(64, 3, InitScheme::xavier));
  return std::make_unique<Model>("cnn-test", std::move(layers), 3, std::move(backend), 11);
}

}  // namespace

TEST_CASE("the clipped gradient sum equals the sum of each example's gradient clipped", "[models][dp][unit]") {
  const std::size_t threads = GENERATE(1, 2);
  auto model = small_cnn(std::make_shared<CpuBackend>(), false);
  model->set_threads(threads);
  SplitMix64 random(12);
  const std::size_t batch = 9, dim = model->input_size();
  const auto x = random_vector(batch * dim, random);
  std::vector<std::int32_t> labels(batch);
  for (std::size_t b = 0; b < batch; ++b) labels[b] = static_cast<std::int32_t>(b % 3);

  // Brute force: one forward and backward pass per example gives its own gradient (the mean over one).
  const std::size_t n = model->parameter_count();
  std::vector<std::vector<float>> own(batch, std::vector<float>(n));
  std::vector<double> norms(batch);
  for (std::size_t b = 0; b < batch; ++b) {
    (void)model->forward_backward(x.data() + b * dim, labels.data() + b, 1);
    std::copy(model->gradients().begin(), model->gradients().end(), own[b].begin());
    norms[b] = std::sqrt(squared_norm(own[b]));
  }
  // A clip between the smallest and the largest norm clips some examples and leaves others.
  std::vector<double> sorted = norms;
  std::sort(sorted.begin(), sorted.end());
  const float clip = static_cast<float>(sorted[batch / 2]);
  REQUIRE(sorted.front() < clip);
  REQUIRE(sorted.back() > clip);
  std::vector<double> expected(n, 0.0);
  for (std::size_t b = 0; b < batch; ++b) {
    const double factor = std::min(1.0, clip / norms[b]);
    for (std::size_t i = 0; i < n; ++i) expected[i] += factor * own[b][i];
  }

  (void)model->clipped_gradient_sum(x.data(), labels.data(), batch, clip);
  const auto got = model->gradients();
  for (std::size_t i = 0; i < n; ++i) {
    INFO("parameter " << i << " with " << threads << " threads");
    CHECK(got[i] == Approx(expected[i]).margin(1e-5).epsilon(1e-3));
  }
}

TEST_CASE("a model with batch norm refuses per-example clipping and names group normalization",
          "[models][dp][unit]") {
  auto model = small_cnn(std::make_shared<CpuBackend>(), true);
  const auto obstacle = model->per_example_obstacle();
  REQUIRE(obstacle);
  CHECK_THAT(*obstacle, Catch::Contains("batch_norm") && Catch::Contains("GroupNorm"));
  std::vector<float> x(2 * model->input_size(), 0.5f);
  std::vector<std::int32_t> labels{0, 1};
  CHECK_THROWS_AS(model->clipped_gradient_sum(x.data(), labels.data(), 2, 1.0f), meridian::error::UserError);
  CHECK_FALSE(small_cnn(std::make_shared<CpuBackend>(), false)->per_example_obstacle());
}
