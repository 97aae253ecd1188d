// The device kit's overlap probe: does the daemon's background snapshot (daemon/backend/async_parameter_copy.h
// over cuda::ParameterSnapshot) run while the next step's forward and backward pass computes, as
// docs/cuda.md says it does? For each model it times, with CUDA events on the backend's compute stream
// (median of --repeats runs after one warm-up):
//   compute  forward_backward(batch) alone (the batch upload, the layers, the loss read back);
//   copy     the snapshot alone: start, guard_writes, wait;
//   both     the daemon's schedule: start (step k's parameters), forward_backward (step k + 1),
//            guard_writes (before the update that writes them), wait.
// hidden = (compute + copy - both) / min(compute, copy) is the share of the shorter one that ran
// alongside the other: 1 when fully hidden, 0 when serialized. It also checks that the snapshot holds
// the parameters as they were at start. Prints one JSON line per model.
//
// Usage: meridian_snapshot_overlap_probe [--repeats N]   (the kit's `run` calls it; scripts/gpu-kit builds it)
// Without a usable device it prints {"skipped": "no CUDA device: <reason>"} and exits 0.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cuda/cuda_backend.h"
#include "cuda/event.h"
#include "daemon/backend/async_parameter_copy.h"
#include "models/device.h"
#include "models/model_factory.h"

namespace {

using meridian::cuda::Event;

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

// Median device milliseconds, between events on `stream`, of `work` after one untimed run.
double time_ms(cudaStream_t stream, int repeats, const std::function<void()>& work) {
  Event start(Event::Timing::kOn), stop(Event::Timing::kOn);
  work();
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

struct Case {
  std::string kind;
  std::vector<std::size_t> hidden;  // mlp only; empty for the default 256,128
  std::size_t batch;
};

nlohmann::json probe(const Case& c, int repeats) {
  auto backend = std::make_shared<meridian::cuda::CudaBackend>(0);
  auto model = meridian::models::make_model(c.kind, {1, 28, 28}, 10, c.hidden, backend, 1);
  const std::size_t n = model->parameter_count();
  auto copy = meridian::daemon::make_async_parameter_copy(*backend, n);
  std::vector<float> x(c.batch * 784);
  std::vector<std::int32_t> labels(c.batch);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 251) / 251.0f;
  for (std::size_t i = 0; i < c.batch; ++i) labels[i] = static_cast<std::int32_t>(i % 10);
  const cudaStream_t stream = backend->stream();
  const float* params = model->parameters().data();

  const double compute_ms =
      time_ms(stream, repeats, [&] { model->forward_backward(x.data(), labels.data(), c.batch); });
  const double copy_ms = time_ms(stream, repeats, [&] {
    copy->start(params, n);
    copy->guard_writes();
    copy->wait();
  });
  const double both_ms = time_ms(stream, repeats, [&] {
    copy->start(params, n);
    model->forward_backward(x.data(), labels.data(), c.batch);
    copy->guard_writes();
    copy->wait();
  });

  std::vector<float> expected(n);
  model->read_parameters(expected);
  copy->start(params, n);
  model->forward_backward(x.data(), labels.data(), c.batch);
  copy->guard_writes();
  const auto taken = copy->wait();
  const bool same = std::equal(taken.begin(), taken.end(), expected.begin(), expected.end());

  const double hidden = (compute_ms + copy_ms - both_ms) / std::min(compute_ms, copy_ms);
  std::string widths;
  for (const std::size_t w : c.hidden) {
    if (!widths.empty()) widths += ',';
    widths += std::to_string(w);
  }
  return {{"model", c.kind},           {"hidden_widths", widths}, {"parameters", n},    {"batch", c.batch},
          {"compute_ms", compute_ms},  {"copy_ms", copy_ms},      {"both_ms", both_ms}, {"hidden", hidden},
          {"overlaps", hidden >= 0.5}, {"snapshot_exact", same},  {"repeats", repeats}};
}

}  // namespace

int main(int argc, char** argv) {
  int repeats = 21;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--repeats") == 0 && i + 1 < argc && std::atoi(argv[i + 1]) >= 1) {
      repeats = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: %s [--repeats N]   (N >= 1, default 21)\n", argv[0]);
      return 2;
    }
  }
  const auto cuda = meridian::models::probe_cuda();
  if (cuda.device_count == 0) {
    std::printf("%s\n", nlohmann::json{{"skipped", "no CUDA device: " + cuda.reason}}.dump().c_str());
    return 0;
  }
  // The two product networks at the default batch, and a wide MLP (about 20 M parameters, 80 MB) whose
  // copy and step both take milliseconds, so the share hidden is not lost in launch latency.
  const Case cases[] = {{"mlp", {}, 64}, {"cnn", {}, 64}, {"mlp", {4096, 4096}, 256}};
  try {
    for (const Case& c : cases) std::printf("%s\n", probe(c, repeats).dump().c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "meridian_snapshot_overlap_probe: %s\n", e.what());
    return 1;
  }
  return 0;
}
