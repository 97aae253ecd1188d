// Cost of image augmentation on the trainer's side: samples per second of (a) gathering a batch alone
// and (b) a whole training step (gather, forward, backward, momentum SGD), each without augmentation
// and with random crop + horizontal flip, on a synthetic image dataset (random pixels, random labels;
// the arithmetic does not depend on the values). The gather is what the site daemon does every step:
// BatchOrder hands out rows, ImageAugmentation::gather writes them into one reused batch buffer.
//
// Usage: meridian_bench_augmentation_throughput [--model cnn|mlp] [--shape 1x28x28] [--augment crop:2,flip]
//        [--threads 1] [--batch 64] [--steps 300] [--repeats 3]
// Prints one JSON line per (kind, augmentation, repeat): samples per second of wall time, and per second
// of this process's CPU time, which stays meaningful on a machine shared with other work.
#include <chrono>
#include <ctime>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "models/cpu_backend.h"
#include "error/error.h"
#include "models/data/batch_order.h"
#include "models/data/image_augmentation.h"
#include "models/model_factory.h"
#include "models/optimizer.h"
#include "models/split_mix64.h"
#include "models/thread_policy.h"

using namespace meridian::models;

namespace {

double process_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

Shape parse_shape(const std::string& text) {
  Shape s;
  if (std::sscanf(text.c_str(), "%zux%zux%zu", &s.channels, &s.height, &s.width) != 3) {
    throw meridian::error::UserError("--shape '" + text + "' is not CxHxW (e.g. 1x28x28)");
  }
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  std::string model_name = "cnn", shape_text = "1x28x28", augment_text = "crop:2,flip";
  int threads = 1;
  std::size_t batch = 64, steps = 300, repeats = 3;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--model") model_name = value;
    else if (flag == "--shape") shape_text = value;
    else if (flag == "--augment") augment_text = value;
    else if (flag == "--threads") threads = std::atoi(value.c_str());
    else if (flag == "--batch") batch = std::strtoul(value.c_str(), nullptr, 10);
    else if (flag == "--steps") steps = std::strtoul(value.c_str(), nullptr, 10);
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
  try {
    const Shape shape = parse_shape(shape_text);
    const data::AugmentationSpec spec = data::parse_augmentation_spec(augment_text);

    data::Dataset train;
    train.rows = 20000;
    train.channels = shape.channels;
    train.height = shape.height;
    train.width = shape.width;
    train.dim = shape.size();
    train.classes = 10;
    train.features.resize(train.rows * train.dim);
    train.labels.resize(train.rows);
    SplitMix64 random(1);
    for (float& v : train.features) v = random.uniform(1.0f);
    for (auto& l : train.labels) l = static_cast<std::int32_t>(random.below(10));

    auto backend = std::make_shared<CpuBackend>(1);
    std::unique_ptr<Model> model = make_model(model_name, shape, train.classes, {}, backend, 1);
    use_threads(*model, *backend, static_cast<std::size_t>(threads));
    OptimizerConfig config;
    config.kind = OptimizerKind::momentum;
    config.momentum = 0.9f;
    ScheduleConfig schedule;
    schedule.base_lr = 0.01f;
    Optimizer optimizer(config, schedule, model->parameters().size(), backend);

    // One batch buffer for the whole run, touched once before timing, as the daemon keeps it.
    std::vector<float> x(batch * train.dim, 0.0f);
    std::vector<std::int32_t> labels(batch, 0);

    for (const bool augmented : {false, true}) {
      const data::ImageAugmentation augmentation(train, augmented ? spec : data::AugmentationSpec{}, 7);
      data::BatchOrder order(train.rows, 3);
      auto gather = [&] {
        const auto rows = order.next(batch);
        augmentation.gather(rows, order.position().epoch, x.data(), labels.data());
        return rows.size();
      };
      auto step = [&] {
        const std::size_t n = gather();
        model->forward_backward(x.data(), labels.data(), n);
        optimizer.step(model->parameters(), model->gradients(), model->pool());
      };
      for (std::size_t i = 0; i < 30; ++i) step();  // warm-up
      for (std::size_t r = 0; r < repeats; ++r) {
        for (const char* kind : {"gather", "step"}) {
          const bool whole = std::string(kind) == "step";
          const std::size_t count = whole ? steps : steps * 20;
          const auto start = std::chrono::steady_clock::now();
          const double cpu_start = process_cpu_seconds();
          for (std::size_t i = 0; i < count; ++i) {
            if (whole) step();
            else gather();
          }
          const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
          const double cpu_seconds = process_cpu_seconds() - cpu_start;
          std::printf(
              "{\"kind\": \"%s\", \"model\": \"%s\", \"shape\": \"%s\", \"augment\": \"%s\", \"threads\": %d, "
              "\"batch\": %zu, \"samples_per_second\": %.0f, \"samples_per_cpu_second\": %.0f}\n",
              kind, model_name.c_str(), shape.to_string().c_str(), augmentation.spec().to_string().c_str(), threads,
              batch, static_cast<double>(count * batch) / seconds, static_cast<double>(count * batch) / cpu_seconds);
          std::fflush(stdout);
        }
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  }
  return 0;
}
