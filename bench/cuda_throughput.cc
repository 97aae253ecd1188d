// CUDA throughput figures for `make bench`: cuBLAS GEMM at the MLP's shapes, whole training steps of
// logreg, MLP and CNN (models::Model on CudaBackend, batch 64, Nesterov; CPU alongside), the parameter
// snapshot's device → host bandwidth (pinned, as ParameterSnapshot does it, against a plain pageable
// copy), and how much of the snapshot copy hides behind compute. Each figure is the median of --repeats
// timed runs (CUDA events; the model steps on the host clock). Without a usable device it prints "no CUDA device:
// <reason>" and exits 0.
//
// Usage: build/meridian_bench_cuda_throughput [--repeats N]   (bench/cuda-throughput runs it)
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "cuda/blas_handle.h"
#include "cuda/cuda_backend.h"
#include "cuda/device_buffer.h"
#include "cuda/device_properties.h"
#include "cuda/error.h"
#include "cuda/event.h"
#include "cuda/gemm.h"
#include "cuda/parameter_snapshot.h"
#include "cuda/stream.h"
#include "models/device.h"
#include "models/cpu_backend.h"
#include "models/model_factory.h"
#include "models/optimizer.h"

using namespace meridian::cuda;

namespace {

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

// Median milliseconds of `repeats` runs of `work` enqueued on `stream`, after one warm-up run.
double time_ms(cudaStream_t stream, int repeats, const std::function<void()>& work) {
  Event start(Event::Timing::kOn), stop(Event::Timing::kOn);
  work();
  MERIDIAN_CUDA_CHECK(cudaStreamSynchronize(stream));
  std::vector<double> ms;
  for (int r = 0; r < repeats; ++r) {
    start.record(stream);
    work();
    stop.record(stream);
    stop.synchronize();
    ms.push_back(Event::elapsed_ms(start, stop));
  }
  return median(ms);
}

void gemm_figures(int repeats) {
  Stream stream;
  BlasHandle blas(stream.get());
  struct Shape {
    const char* what;
    int m, n, k;
  };
  // Forward GEMMs of the MLP 784-256-128-10 at batch 64, and a large square one for the device's peak.
  const Shape shapes[] = {{"mlp fc1 64x784 * 784x256", 64, 256, 784},
                          {"mlp fc2 64x256 * 256x128", 64, 128, 256},
                          {"square 2048", 2048, 2048, 2048}};
  std::printf("%-28s %12s %12s\n", "cuBLAS sgemm (fp32)", "median ms", "GFLOP/s");
  for (const Shape& s : shapes) {
    DeviceBuffer<float> a(static_cast<std::size_t>(s.m) * s.k), b(static_cast<std::size_t>(s.k) * s.n),
        c(static_cast<std::size_t>(s.m) * s.n);
    a.zero(stream.get());
    b.zero(stream.get());
    c.zero(stream.get());
    const int iterations = s.m * s.n * s.k > 1 << 28 ? 10 : 1000;
    const double ms = time_ms(stream.get(), repeats, [&] {
      for (int i = 0; i < iterations; ++i) {
        gemm(blas.get(), Transpose::kNo, Transpose::kNo, s.m, s.n, s.k, 1.0f, a.data(), s.k, b.data(), s.n, 0.0f,
             c.data(), s.n);
      }
    });
    const double per_call = ms / iterations;
    std::printf("%-28s %12.4f %12.1f\n", s.what, per_call, 2.0 * s.m * s.n * s.k / (per_call * 1e6));
  }
}

// Whole training steps of the three models at batch 64, as `meridian train --device cuda` runs them:
// models::Model and models::Optimizer (Nesterov) on CudaBackend, so parameters, gradients, activations
// and optimizer state stay in device memory; each step uploads the batch (features and labels, from
// pageable host memory) and downloads the loss. Timed on the host clock (the loss download synchronizes
// every step), median of `repeats` runs of `steps` steps, next to the CPU backend (1 thread) in the same
// run for the ratio.
double samples_per_second(const std::string& kind, std::shared_ptr<meridian::models::Backend> backend, int repeats,
                          int steps) {
  using namespace meridian::models;
  const std::size_t batch = 64;
  auto model = make_model(kind, {1, 28, 28}, 10, {}, backend, 1);
  OptimizerConfig config;
  config.kind = OptimizerKind::nesterov;
  ScheduleConfig schedule;
  schedule.base_lr = 0.01f;
  Optimizer optimizer(config, schedule, model->parameter_count(), backend);
  std::vector<float> x(batch * 784);
  std::vector<std::int32_t> labels(batch);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 251) / 251.0f;
  for (std::size_t i = 0; i < batch; ++i) labels[i] = static_cast<std::int32_t>(i % 10);
  auto step = [&] {
    model->forward_backward(x.data(), labels.data(), batch);
    optimizer.step(model->parameters(), model->gradients());
  };
  step();  // warm-up: allocations, cuDNN algorithm choice
  std::vector<double> rates;
  for (int r = 0; r < repeats; ++r) {
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < steps; ++i) step();
    backend->copy_to_host(x.data(), model->parameters().data(), sizeof(float));  // waits for the last update
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    rates.push_back(static_cast<double>(batch) * steps / seconds);
  }
  return median(rates);
}

void model_step_figures(int repeats) {
  std::printf("\n%-40s %14s %14s %8s\n", "training step, batch 64, nesterov", "GPU samples/s", "CPU samples/s",
              "GPU/CPU");
  for (const std::string kind : {"logreg", "mlp", "cnn"}) {
    const double gpu = samples_per_second(kind, std::make_shared<CudaBackend>(0), repeats, 200);
    const double cpu =
        samples_per_second(kind, std::make_shared<meridian::models::CpuBackend>(1), repeats, kind == "cnn" ? 20 : 100);
    std::printf("%-40s %14.0f %14.0f %8.1f\n", kind.c_str(), gpu, cpu, gpu / cpu);
  }
}

void snapshot_figures(int repeats) {
  std::printf("\n%-28s %12s %12s %12s\n", "snapshot device->host", "floats", "pinned GB/s", "pageable GB/s");
  // The MLP 784-256-128-10 (235,146 parameters) and a 25M-parameter model.
  for (const std::size_t n : {std::size_t{235146}, std::size_t{25} << 20}) {
    Stream compute;
    DeviceBuffer<float> params(n);
    params.zero(compute.get());
    ParameterSnapshot snapshot(n);
    const double pinned_ms = time_ms(compute.get(), repeats, [&] {
      snapshot.start(params.data(), n, compute.get());
      snapshot.guard_writes(compute.get());  // the timing event then covers the copy
      snapshot.wait();
    });
    std::vector<float> pageable(n);
    std::memset(pageable.data(), 0, n * sizeof(float));
    const double pageable_ms = time_ms(compute.get(), repeats, [&] { params.copy_to_host(pageable, compute.get()); });
    const double gb = static_cast<double>(n) * sizeof(float) / 1e9;
    std::printf("%-28s %12zu %12.2f %12.2f\n", "", n, gb / (pinned_ms / 1e3), gb / (pageable_ms / 1e3));
  }
}

void overlap_figures(int repeats) {
  // A snapshot of a 25M-parameter model while the compute stream runs GEMMs that only read other
  // buffers: the time saved against running them one after the other is the overlap.
  const std::size_t n = std::size_t{25} << 20;
  Stream compute;
  BlasHandle blas(compute.get());
  DeviceBuffer<float> params(n), a(1024 * 1024), b(1024 * 1024), c(1024 * 1024);
  for (auto* buffer : {&params, &a, &b, &c}) buffer->zero(compute.get());
  ParameterSnapshot snapshot(n);
  auto gemms = [&] {
    for (int i = 0; i < 20; ++i) {
      gemm(blas.get(), Transpose::kNo, Transpose::kNo, 1024, 1024, 1024, 1.0f, a.data(), 1024, b.data(), 1024, 0.0f,
           c.data(), 1024);
    }
  };
  auto copy = [&] {
    snapshot.start(params.data(), n, compute.get());
    snapshot.guard_writes(compute.get());
    snapshot.wait();
  };
  const double compute_ms = time_ms(compute.get(), repeats, gemms);
  const double copy_ms = time_ms(compute.get(), repeats, copy);
  const double both_ms = time_ms(compute.get(), repeats, [&] {
    snapshot.start(params.data(), n, compute.get());
    gemms();
    snapshot.guard_writes(compute.get());
    snapshot.wait();
  });
  const double hidden = (compute_ms + copy_ms - both_ms) / std::min(compute_ms, copy_ms);
  std::printf("\noverlap: compute %.3f ms, snapshot %.3f ms, both %.3f ms; %.0f%% of the shorter one hidden\n",
              compute_ms, copy_ms, both_ms, 100.0 * hidden);
}

}  // namespace

int main(int argc, char** argv) {
  int repeats = 7;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--repeats") == 0 && i + 1 < argc) {
      repeats = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: %s [--repeats N]   (N >= 1, default 7)\n", argv[0]);
      return 2;
    }
  }
  if (repeats < 1) {
    std::fprintf(stderr, "%s: --repeats must be at least 1\n", argv[0]);
    return 2;
  }
  const auto cuda = meridian::models::probe_cuda();
  if (cuda.device_count == 0) {
    std::printf("no CUDA device: %s\n", cuda.reason.c_str());
    return 0;
  }
  try {
    use_device(0);
    const auto devices = list_devices();
    if (!devices.empty()) std::printf("%s; median of %d repeats\n\n", describe(devices.front()).c_str(), repeats);
    gemm_figures(repeats);
    model_step_figures(repeats);
    snapshot_figures(repeats);
    overlap_figures(repeats);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "meridian_bench_cuda_throughput: %s\n", e.what());
    return 1;
  }
  return 0;
}
