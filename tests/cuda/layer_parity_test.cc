// The normalization, residual, pooling, dropout and activation layers on CudaBackend against the CPU
// reference, forward and backward in training and evaluation mode, and whole training steps of resnet8 and
// mlp-bn (running statistics included). Skipped, with the runtime's reason, where there is no CUDA device.
//
// Error bounds (fp32, u = 2⁻²⁴), and why:
// - dropout, global average pooling's backward: exact (the same hash, one multiply per element).
// - average pooling: exact for window·window ≤ 9 terms added in the same row-major order; the scale is one
//   multiply.
// - GELU, tanh, sigmoid: CUDA's erff/tanhf/expf are within 2 ulp (glibc's within 1), and nvcc fuses
//   multiply-adds: 1e-5·max(|value|, 1).
// - batch norm and group norm: the block tree sums and the CPU's eight-way blocked sums each err by at
//   most γ_n·Σ|terms| (n ≤ 200 here), then the normalization divides by a standard deviation of order 1:
//   1e-4·max(|value|, 1).
// - residual blocks and whole steps: the convolutions' GEMM bound (model_parity_test.cc) carried through
//   batch norm: 1e-4·max(|value|, 1) for one step; the loss 1e-5 relative.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "cuda/cuda_backend.h"
#include "models/activation.h"
#include "models/average_pool2d.h"
#include "models/backend_buffer.h"
#include "models/batch_norm.h"
#include "models/cpu_backend.h"
#include "models/dropout.h"
#include "models/global_average_pool.h"
#include "models/group_norm.h"
#include "models/model_factory.h"
#include "models/optimizer.h"
#include "models/residual_network.h"
#include "models/split_mix64.h"
#include "tests/cuda/skip_without_device.h"

using meridian::cuda::CudaBackend;
using namespace meridian::models;

namespace {

std::vector<float> random_values(std::size_t n, std::uint32_t seed, float bound = 1.0f, float offset = 0.0f) {
  std::mt19937 engine(seed);
  std::uniform_real_distribution<float> dist(-bound, bound);
  std::vector<float> v(n);
  for (float& x : v) x = offset + dist(engine);
  return v;
}

BackendBuffer<float> upload(CudaBackend& gpu, const std::vector<float>& host) {
  BackendBuffer<float> buffer(gpu, host.size());
  gpu.copy_from_host(buffer.data(), host.data(), host.size() * sizeof(float));
  return buffer;
}

std::vector<float> download(CudaBackend& gpu, const float* device, std::size_t n) {
  std::vector<float> host(n);
  gpu.copy_to_host(host.data(), device, n * sizeof(float));
  return host;
}

void check_close(const std::vector<float>& cpu, const std::vector<float>& gpu, double relative,
                 const std::string& what) {
  REQUIRE(cpu.size() == gpu.size());
  std::size_t bad = 0;
  double worst = 0.0;
  for (std::size_t i = 0; i < cpu.size(); ++i) {
    const double scale = std::max(1.0, static_cast<double>(std::fabs(cpu[i])));
    const double error = std::fabs(static_cast<double>(cpu[i]) - static_cast<double>(gpu[i])) / scale;
    worst = std::max(worst, error);
    if (!(error <= relative)) ++bad;
  }
  INFO(what << ": worst scaled error " << worst << ", bound " << relative);
  CHECK(bad == 0);
}

// A layer's forward and backward on both backends in the given mode, with the same parameters, state
// (running statistics around (0, 1)), seed and inputs; the state after the forward is compared too.
void check_layer(const std::function<std::unique_ptr<Layer>()>& make, std::size_t batch, bool training, double bound,
                 const std::string& what) {
  CpuBackend cpu;
  CudaBackend gpu;
  auto cpu_layer = make();
  auto gpu_layer = make();
  const std::size_t np = cpu_layer->parameter_count(), ns = cpu_layer->state_count();
  const std::size_t in = cpu_layer->input_shape().size() * batch, out = cpu_layer->output_shape().size() * batch;
  const auto params = random_values(np, 1, 0.5f, 0.5f), state = random_values(ns, 4, 0.5f, 1.0f);
  const auto x = random_values(in, 2), dy = random_values(out, 3);
  SplitMix64 cpu_random(5), gpu_random(5);  // dropout seeds; the parameters are overwritten below

  std::vector<float> cpu_params(np), cpu_grads(np), cpu_state(ns), y_cpu(out), dx_cpu(in);
  cpu_layer->bind(cpu_params, cpu_grads);
  cpu_layer->bind_state(cpu_state);
  cpu_layer->initialize(cpu_random);
  std::copy(params.begin(), params.end(), cpu_params.begin());  // the bound spans stay where they are
  std::copy(state.begin(), state.end(), cpu_state.begin());
  cpu_layer->set_training(training);
  cpu_layer->reserve(cpu, batch);
  cpu_layer->forward(cpu, x.data(), y_cpu.data(), batch);
  cpu_layer->backward(cpu, x.data(), y_cpu.data(), dy.data(), dx_cpu.data(), batch);

  // The layer initializes on the host (as Model::initialize does), then runs on device buffers.
  std::vector<float> host_params(np), host_state(ns);
  gpu_layer->bind(host_params, host_params);
  gpu_layer->bind_state(host_state);
  gpu_layer->initialize(gpu_random);
  auto d_params = upload(gpu, params), d_state = upload(gpu, state);
  BackendBuffer<float> d_grads(gpu, np), d_y(gpu, out), d_dx(gpu, in);
  auto d_x = upload(gpu, x), d_dy = upload(gpu, dy);
  gpu_layer->bind(d_params.span(), d_grads.span());
  gpu_layer->bind_state(d_state.span());
  gpu_layer->set_training(training);
  gpu_layer->reserve(gpu, batch);
  gpu_layer->forward(gpu, d_x.data(), d_y.data(), batch);
  gpu_layer->backward(gpu, d_x.data(), d_y.data(), d_dy.data(), d_dx.data(), batch);

  check_close(y_cpu, download(gpu, d_y.data(), out), bound, what + " output");
  check_close(dx_cpu, download(gpu, d_dx.data(), in), bound, what + " input gradient");
  if (np > 0) check_close(cpu_grads, download(gpu, d_grads.data(), np), bound, what + " parameter gradients");
  if (ns > 0) check_close(cpu_state, download(gpu, d_state.data(), ns), bound, what + " running statistics");
}

}  // namespace

TEST_CASE("batch norm and group norm on the GPU match the CPU in training and evaluation",
          "[cuda][parity][layers][unit]") {
  MERIDIAN_SKIP_WITHOUT_CUDA_DEVICE();
  for (const bool training : {true, false}) {
    INFO((training ? "training" : "evaluation"));
    check_layer([] { return std::make_unique<BatchNorm>(Shape{16, 7, 7}); }, 4, training, 1e-4, "batch_norm2d");
    check_layer(
        [] {
          return std::make_unique<BatchNorm>(Shape{33, 1, 1}, 0.3f, 1e-3f);
        },
        5, training, 1e-4, "batch_norm1d");
  }
  check_layer([] { return std::make_unique<GroupNorm>(Shape{8, 5, 5}, 4); }, 3, true, 1e-4, "group_norm");
}

TEST_CASE("activations, pooling and dropout on the GPU match the CPU", "[cuda][parity][layers][unit]") {
  MERIDIAN_SKIP_WITHOUT_CUDA_DEVICE();
  for (const Activation f : {Activation::gelu, Activation::tanh, Activation::sigmoid})
    check_layer([f] { return std::make_unique<ActivationLayer>(Shape{4, 6, 6}, f); }, 3, true, 1e-5, "activation");
  check_layer([] { return std::make_unique<AveragePool2d>(Shape{3, 8, 8}, 2, 2); }, 2, true, 0.0, "avg_pool2d(k2,s2)");
  check_layer([] { return std::make_unique<AveragePool2d>(Shape{2, 7, 9}, 3, 2); }, 3, true, 0.0, "avg_pool2d(k3,s2)");
  check_layer([] { return std::make_unique<GlobalAveragePool>(Shape{5, 7, 7}); }, 3, true, 1e-6, "global_avg_pool");
  check_layer([] { return std::make_unique<Dropout>(Shape{6, 10, 10}, 0.3f); }, 4, true, 0.0, "dropout (training)");
  check_layer([] { return std::make_unique<Dropout>(Shape{6, 10, 10}, 0.3f); }, 4, false, 0.0, "dropout (evaluation)");
}

TEST_CASE("residual blocks on the GPU match the CPU", "[cuda][parity][layers][unit]") {
  MERIDIAN_SKIP_WITHOUT_CUDA_DEVICE();
  check_layer([] { return make_basic_block(Shape{8, 10, 10}, 8, 1); }, 3, true, 1e-4, "identity basic block");
  check_layer([] { return make_basic_block(Shape{8, 10, 10}, 16, 2); }, 3, true, 1e-4, "projection basic block");
  check_layer(
      [] {
        return make_basic_block(Shape{8, 10, 10}, 16, 2);
      },
      3, false, 1e-4, "projection basic block (evaluation)");
}

TEST_CASE("a training step of resnet8 and mlp-bn on the GPU matches the CPU, running statistics included",
          "[cuda][parity][model][unit]") {
  MERIDIAN_SKIP_WITHOUT_CUDA_DEVICE();
  for (const std::string kind : {"resnet8", "mlp-bn"}) {
    INFO(kind);
    struct Result {
      float loss;
      std::vector<float> parameters, state, logits;
    };
    auto run = [&](std::shared_ptr<Backend> backend) {
      auto model = make_model(kind, {1, 28, 28}, 10, {32, 16}, backend, 7);
      OptimizerConfig config;
      config.kind = OptimizerKind::momentum;
      ScheduleConfig schedule;
      schedule.base_lr = 0.05f;
      Optimizer optimizer(config, schedule, model->parameter_count(), backend);
      const std::size_t batch = 16;
      const auto x = random_values(batch * 784, 9);
      std::vector<std::int32_t> labels(batch);
      for (std::size_t i = 0; i < batch; ++i) labels[i] = static_cast<std::int32_t>(i % 10);
      Result r;
      r.loss = model->forward_backward(x.data(), labels.data(), batch);
      optimizer.step(model->parameters(), model->gradients());
      r.parameters.resize(model->parameter_count());
      model->read_parameters(r.parameters);
      r.state.resize(model->state_count());
      model->read_state(r.state);
      const float* logits = model->forward(x.data(), batch);
      r.logits.resize(batch * 10);
      backend->copy_to_host(r.logits.data(), logits, r.logits.size() * sizeof(float));
      return r;
    };
    const Result cpu = run(std::make_shared<CpuBackend>(1));
    const Result gpu = run(std::make_shared<CudaBackend>(0));
    CHECK(gpu.loss == Approx(cpu.loss).epsilon(1e-5));
    check_close(cpu.parameters, gpu.parameters, 1e-4, "parameters after the update");
    check_close(cpu.state, gpu.state, 1e-4, "running statistics");
    check_close(cpu.logits, gpu.logits, 1e-4, "evaluation logits");
  }
}
