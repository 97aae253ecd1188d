// CUDA throughput figures for `make bench`: cuBLAS GEMM at the MLP's shapes, a whole MLP training step
// (784-256-128-10, batch 64, the Linear/ReLU layers on CudaBackend, Nesterov momentum), the parameter
// snapshot's device → host bandwidth (pinned, as ParameterSnapshot does it, against a plain pageable
// copy), and how much of the snapshot copy hides behind compute. Each figure is the median of --repeats
// timed runs (CUDA events). Without a usable device it prints "no CUDA device: <reason>" and exits 0.
//
// Usage: build/meridian_bench_cuda_throughput [--repeats N]   (bench/cuda-throughput runs it)
#include <cuda_runtime_api.h>

#include <algorithm>
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
#include "models/linear.h"
#include "models/relu.h"

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

// One training step of the MLP 784-256-128-10 at batch 64 with every operation on the GPU: forward,
// softmax cross-entropy (which returns the loss to the host, as a trainer needs it), backward and a
// Nesterov momentum update of the whole parameter buffer.
void mlp_step_figures(int repeats) {
  using namespace meridian::models;
  CudaBackend gpu;
  const std::size_t batch = 64;
  Linear fc1(784, 256, InitScheme::he), fc2(256, 128, InitScheme::he), fc3(128, 10, InitScheme::xavier);
  Relu relu1({256, 1, 1}), relu2({128, 1, 1});
  const std::size_t params = fc1.parameter_count() + fc2.parameter_count() + fc3.parameter_count();
  DeviceBuffer<float> w(params), g(params), u(params), x(batch * 784), a1(batch * 256), r1(batch * 256),
      a2(batch * 128), r2(batch * 128), logits(batch * 10), d3(batch * 10), dr2(batch * 128), da2(batch * 128),
      dr1(batch * 256), da1(batch * 256);
  DeviceBuffer<std::int32_t> labels(batch);
  for (auto* buffer : {&w, &u, &x}) buffer->zero(gpu.stream());
  labels.zero(gpu.stream());
  std::size_t offset = 0;
  for (Linear* layer : {&fc1, &fc2, &fc3}) {
    const std::size_t n = layer->parameter_count();
    layer->bind({w.data() + offset, n}, {g.data() + offset, n});
    offset += n;
  }
  auto step = [&] {
    fc1.forward(gpu, x.data(), a1.data(), batch);
    relu1.forward(gpu, a1.data(), r1.data(), batch);
    fc2.forward(gpu, r1.data(), a2.data(), batch);
    relu2.forward(gpu, a2.data(), r2.data(), batch);
    fc3.forward(gpu, r2.data(), logits.data(), batch);
    gpu.softmax_cross_entropy(batch, 10, logits.data(), labels.data(), d3.data());
    fc3.backward(gpu, r2.data(), logits.data(), d3.data(), dr2.data(), batch);
    relu2.backward(gpu, a2.data(), r2.data(), dr2.data(), da2.data(), batch);
    fc2.backward(gpu, r1.data(), a2.data(), da2.data(), dr1.data(), batch);
    relu1.backward(gpu, a1.data(), r1.data(), dr1.data(), da1.data(), batch);
    fc1.backward(gpu, x.data(), a1.data(), da1.data(), nullptr, batch);
    gpu.momentum_update(params, w.data(), u.data(), g.data(), 0.01f, 0.9f, 0.0f, true);
  };
  const int steps = 200;
  const double ms = time_ms(gpu.stream(), repeats, [&] {
    for (int i = 0; i < steps; ++i) step();
  });
  std::printf("\nmlp 784-256-128-10 training step, batch 64: %.4f ms/step, %.0f samples/s\n", ms / steps,
              batch * steps / (ms / 1e3));
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
    mlp_step_figures(repeats);
    snapshot_figures(repeats);
    overlap_figures(repeats);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "meridian_bench_cuda_throughput: %s\n", e.what());
    return 1;
  }
  return 0;
}
