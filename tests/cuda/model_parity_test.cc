// Whole models and the cuDNN layers on CudaBackend against the CPU reference: the convolution and max
// pooling layers (cuDNN on the GPU, im2col + GEMM and an argmax record on the CPU), and a whole training
// step (forward, loss, backward, optimizer) of logreg, MLP and CNN with every optimizer, the model's
// parameters, gradients, activations and optimizer state living in device memory. Skipped, with the
// runtime's reason, where there is no CUDA device.
//
// Error bounds (fp32, u = 2⁻²⁴), and why:
// - flatten: exact (a device-to-device copy).
// - max pooling forward and backward: exact on tie-free inputs (a maximum is copied, not computed; the
//   inputs are random floats, so windows have no equal maxima).
// - convolution (output, input, weight and bias gradients): 1e-4·max(|value|, 1). cuDNN accumulates the
//   patch sums (k ≤ 150 here) in another order and blocking than OpenBLAS, each within γ_k·Σ|terms|, and
//   FMA math only (no TF32) is set on the descriptor.
// - a training step: loss 1e-5 relative (softmax, as in backend_parity_test.cc); gradients and the
//   updated parameters and optimizer state 1e-4·max(|value|, 1): the layers' GEMM-bound error, which the
//   optimizer update carries through scaled by lr < 1.
// - ten steps of training: 1e-3·max(|value|, 1) for the parameters, the same errors compounded.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "cuda/cuda_backend.h"
#include "models/backend_buffer.h"
#include "models/conv2d.h"
#include "models/cpu_backend.h"
#include "models/flatten.h"
#include "models/max_pool2d.h"
#include "models/model_factory.h"
#include "models/optimizer.h"
#include "tests/cuda/skip_without_device.h"

using meridian::cuda::CudaBackend;
using meridian::models::Backend;
using meridian::models::BackendBuffer;
using meridian::models::Conv2d;
using meridian::models::CpuBackend;
using meridian::models::Flatten;
using meridian::models::InitScheme;
using meridian::models::MaxPool2d;
using meridian::models::Model;
using meridian::models::Optimizer;
using meridian::models::OptimizerConfig;
using meridian::models::OptimizerKind;
using meridian::models::ScheduleConfig;
using meridian::models::Shape;

namespace {

std::vector<float> random_values(std::size_t n, std::uint32_t seed, float bound = 1.0f) {
  std::mt19937 engine(seed);
  std::uniform_real_distribution<float> dist(-bound, bound);
  std::vector<float> v(n);
  for (float& x : v) x = dist(engine);
  return v;
}

// Device memory from `gpu` holding `host`, and back.
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

// A layer's forward and backward on both backends, with the same parameters and inputs.
template <typename MakeLayer>
void check_layer(MakeLayer make, std::size_t batch, double bound, const std::string& what) {
  CpuBackend cpu;
  CudaBackend gpu;
  auto cpu_layer = make();
  auto gpu_layer = make();
  const std::size_t np = cpu_layer->parameter_count();
  const std::size_t in = cpu_layer->input_shape().size() * batch, out = cpu_layer->output_shape().size() * batch;
  const auto params = random_values(np, 1, 0.5f), x = random_values(in, 2), dy = random_values(out, 3);

  std::vector<float> cpu_params = params, cpu_grads(np), y_cpu(out), dx_cpu(in);
  cpu_layer->bind(cpu_params, cpu_grads);
  cpu_layer->reserve(cpu, batch);
  cpu_layer->forward(cpu, x.data(), y_cpu.data(), batch);
  cpu_layer->backward(cpu, x.data(), y_cpu.data(), dy.data(), dx_cpu.data(), batch);

  auto d_params = upload(gpu, params);
  BackendBuffer<float> d_grads(gpu, np), d_y(gpu, out), d_dx(gpu, in);
  auto d_x = upload(gpu, x), d_dy = upload(gpu, dy);
  gpu_layer->bind(d_params.span(), d_grads.span());
  gpu_layer->reserve(gpu, batch);
  gpu_layer->forward(gpu, d_x.data(), d_y.data(), batch);
  gpu_layer->backward(gpu, d_x.data(), d_y.data(), d_dy.data(), d_dx.data(), batch);

  check_close(y_cpu, download(gpu, d_y.data(), out), bound, what + " output");
  check_close(dx_cpu, download(gpu, d_dx.data(), in), bound, what + " input gradient");
  if (np > 0) check_close(cpu_grads, download(gpu, d_grads.data(), np), bound, what + " parameter gradients");
}

struct Step {
  float loss;
  std::vector<float> gradients, parameters, state;
};

// `steps` training steps of `kind` with `optimizer` on `backend`, from the same seed and batches.
Step train(const std::string& kind, OptimizerKind optimizer, std::shared_ptr<Backend> backend, std::size_t steps) {
  const Shape input{1, 28, 28};
  auto model = meridian::models::make_model(kind, input, 10, {32, 16}, backend, 7);
  OptimizerConfig config;
  config.kind = optimizer;
  ScheduleConfig schedule;
  schedule.base_lr = optimizer == OptimizerKind::adam ? 1e-3f : 0.05f;
  Optimizer opt(config, schedule, model->parameter_count(), backend);
  const std::size_t batch = 16;
  Step result{};
  for (std::size_t s = 0; s < steps; ++s) {
    const auto x = random_values(batch * input.size(), 100 + static_cast<std::uint32_t>(s));
    std::vector<std::int32_t> labels(batch);
    for (std::size_t i = 0; i < batch; ++i) labels[i] = static_cast<std::int32_t>((i * 7 + s) % 10);
    result.loss = model->forward_backward(x.data(), labels.data(), batch);
    opt.step(model->parameters(), model->gradients());
  }
  const std::size_t n = model->parameter_count();
  result.gradients.resize(n);
  backend->copy_to_host(result.gradients.data(), model->gradients().data(), n * sizeof(float));
  result.parameters.resize(n);
  model->read_parameters(result.parameters);
  result.state.resize(opt.state().size());
  opt.read_state(result.state);
  return result;
}

}  // namespace

TEST_CASE("cuDNN convolution layers equal the CPU's im2col + GEMM within the GEMM bound",
          "[cuda][parity][layers][unit]") {
  MERIDIAN_SKIP_WITHOUT_CUDA_DEVICE();
  check_layer(
      [] {
        return std::make_unique<Conv2d>(Shape{1, 28, 28}, 6, 5, 1, 2, InitScheme::he);
      },
      4, 1e-4, "conv2d(1->6,k5,p2)");
  check_layer(
      [] {
        return std::make_unique<Conv2d>(Shape{6, 14, 14}, 16, 5, 1, 0, InitScheme::he);
      },
      3, 1e-4, "conv2d(6->16,k5)");
  check_layer(
      [] {
        return std::make_unique<Conv2d>(Shape{3, 9, 7}, 4, 3, 2, 1, InitScheme::he);
      },
      2, 1e-4, "conv2d(3->4,k3,s2,p1)");
}

TEST_CASE("cuDNN max pooling equals the CPU's exactly on tie-free inputs", "[cuda][parity][layers][unit]") {
  MERIDIAN_SKIP_WITHOUT_CUDA_DEVICE();
  check_layer([] { return std::make_unique<MaxPool2d>(Shape{6, 28, 28}, 2, 2); }, 4, 0.0, "max_pool2d(k2,s2)");
  check_layer([] { return std::make_unique<MaxPool2d>(Shape{2, 7, 9}, 3, 2); }, 3, 0.0, "max_pool2d(k3,s2)");
}

TEST_CASE("the flatten layer copies in device memory, bit for bit", "[cuda][parity][layers][unit]") {
  MERIDIAN_SKIP_WITHOUT_CUDA_DEVICE();
  check_layer([] { return std::make_unique<Flatten>(Shape{16, 5, 5}); }, 3, 0.0, "flatten");
}

TEST_CASE("a whole training step on the GPU matches the CPU for every model and optimizer",
          "[cuda][parity][model][unit]") {
  MERIDIAN_SKIP_WITHOUT_CUDA_DEVICE();
  for (const std::string kind : {"logreg", "mlp", "cnn"}) {
    for (const OptimizerKind optimizer :
         {OptimizerKind::sgd, OptimizerKind::momentum, OptimizerKind::nesterov, OptimizerKind::adam}) {
      INFO(kind << " with optimizer " << static_cast<int>(optimizer));
      const Step cpu = train(kind, optimizer, std::make_shared<CpuBackend>(1), 1);
      const Step gpu = train(kind, optimizer, std::make_shared<CudaBackend>(0), 1);
      CHECK(gpu.loss == Approx(cpu.loss).epsilon(1e-5));
      check_close(cpu.gradients, gpu.gradients, 1e-4, "gradients");
      check_close(cpu.parameters, gpu.parameters, 1e-4, "parameters after the update");
      check_close(cpu.state, gpu.state, 1e-4, "optimizer state");
    }
  }
}

TEST_CASE("ten training steps of the CNN on the GPU stay within the compounded bound", "[cuda][parity][model][unit]") {
  MERIDIAN_SKIP_WITHOUT_CUDA_DEVICE();
  const Step cpu = train("cnn", OptimizerKind::nesterov, std::make_shared<CpuBackend>(1), 10);
  const Step gpu = train("cnn", OptimizerKind::nesterov, std::make_shared<CudaBackend>(0), 10);
  check_close(cpu.parameters, gpu.parameters, 1e-3, "parameters after ten steps");
}

TEST_CASE("a model on the GPU starts from the CPU's parameters for the same seed", "[cuda][model][unit]") {
  MERIDIAN_SKIP_WITHOUT_CUDA_DEVICE();
  auto cpu = meridian::models::make_model("cnn", {1, 28, 28}, 10, {}, std::make_shared<CpuBackend>(1), 3);
  auto gpu = meridian::models::make_model("cnn", {1, 28, 28}, 10, {}, std::make_shared<CudaBackend>(0), 3);
  std::vector<float> on_gpu(gpu->parameter_count());
  gpu->read_parameters(on_gpu);
  const auto on_cpu = cpu->parameters();
  CHECK(std::equal(on_cpu.begin(), on_cpu.end(), on_gpu.begin(), on_gpu.end()));
}
