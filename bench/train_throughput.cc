// Meridian side of the training-throughput benchmark (bench/run-all runs it next to
// bench/torch_train_throughput.py): trains the MLP (784-256-128-10), the LeNet-style CNN or resnet8 with batch B
// and heavy-ball momentum SGD on a synthetic Fashion-MNIST-shaped dataset (60000 random 28×28 images,
// random labels; the arithmetic does not depend on the values) and prints one JSON line per repeat.
// A step is what `meridian train` does: gather a shuffled batch, forward, backward, optimizer update.
//
// Usage: meridian_bench_train_throughput --model mlp|cnn|resnet8 --threads T [--batch 64] [--steps 300]
//        [--warmup 30] [--repeats 5]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include <cblas.h>

#include <fstream>

#include "models/cpu_backend.h"
#include "models/minibatcher.h"
#include "models/model_factory.h"
#include "models/optimizer.h"
#include "models/thread_policy.h"
#include "models/split_mix64.h"

using namespace meridian::models;

namespace {

// The OpenBLAS library actually mapped into this process (which alternative the loader chose) and
// its build configuration, so the table states what ran.
std::string blas_in_use() {
  std::ifstream maps("/proc/self/maps");
  std::string line, path;
  while (std::getline(maps, line)) {
    const auto at = line.find('/');
    if (at != std::string::npos && line.find("openblas", at) != std::string::npos) {
      path = line.substr(at);
      break;
    }
  }
  return path + " (" + openblas_get_config() + ")";
}

}  // namespace

int main(int argc, char** argv) {
  std::string model_name = "mlp";
  int threads = 1;
  std::size_t batch = 64, steps = 300, warmup = 30, repeats = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--model") model_name = value;
    else if (flag == "--threads") threads = std::atoi(value.c_str());
    else if (flag == "--batch") batch = std::strtoul(value.c_str(), nullptr, 10);
    else if (flag == "--steps") steps = std::strtoul(value.c_str(), nullptr, 10);
    else if (flag == "--warmup") warmup = std::strtoul(value.c_str(), nullptr, 10);
    else if (flag == "--repeats") repeats = std::strtoul(value.c_str(), nullptr, 10);
    else {
      std::fprintf(stderr, "unknown option %s\n", flag.c_str());
      return 2;
    }
  }
  if (threads < 1 || batch == 0 || steps == 0) {
    std::fprintf(stderr, "--threads, --batch and --steps must be >= 1\n");
    return 2;
  }

  data::Dataset train;
  train.rows = 60000;
  train.dim = 784;
  train.classes = 10;
  train.channels = 1;
  train.height = train.width = 28;
  train.features.resize(train.rows * train.dim);
  train.labels.resize(train.rows);
  SplitMix64 random(1);
  for (float& v : train.features) v = 0.5f + 0.5f * random.uniform(1.0f);
  for (auto& l : train.labels) l = static_cast<std::int32_t>(random.below(10));

  // Threads as `meridian train` uses them (models/thread_policy.h).
  auto backend = std::make_shared<CpuBackend>(1);
  std::unique_ptr<Model> model;
  try {
    model = make_model(model_name, {1, 28, 28}, 10, {}, backend, 1);
    use_threads(*model, *backend, static_cast<std::size_t>(threads));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  }
  OptimizerConfig config;
  config.kind = OptimizerKind::momentum;
  config.momentum = 0.9f;
  ScheduleConfig schedule;
  schedule.base_lr = 0.05f;
  Optimizer optimizer(config, schedule, model->parameters().size(), backend);
  Minibatcher batches(train, batch, 2);

  auto step = [&] {
    std::size_t n = batches.next();
    while (n != batch) n = batches.next();  // skip the short tail batch and the epoch boundary
    model->forward_backward(batches.features(), batches.labels(), n);
    optimizer.step(model->parameters(), model->gradients(), model->pool());
  };
  for (std::size_t i = 0; i < warmup; ++i) step();
  const std::string blas = blas_in_use();
  for (std::size_t r = 0; r < repeats; ++r) {
    const auto start = std::chrono::steady_clock::now();
    for (std::size_t i = 0; i < steps; ++i) step();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf(
        "{\"side\": \"meridian\", \"model\": \"%s\", \"threads\": %d, \"batch\": %zu, \"steps\": %zu, "
        "\"samples_per_second\": %.1f, \"blas\": \"%s\"}\n",
        model_name.c_str(), threads, batch, steps, static_cast<double>(steps * batch) / seconds, blas.c_str());
    std::fflush(stdout);
  }
  return 0;
}
