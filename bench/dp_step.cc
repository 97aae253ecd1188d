// DP-SGD's step cost against an ordinary step on the same network and batch (docs/privacy.md, "DP-SGD"):
// the GroupNorm CNN for 28×28 images below, on random images and labels (the arithmetic does not depend
// on the values). An ordinary step is forward + backward (Model::forward_backward); a DP-SGD step is
// forward + two backward passes with per-example norms and clipping, plus the noise
// (privacy::DpSgd::gradient). bench/dp_step_functorch.py times the same network and batch in PyTorch.
// The optimizer's update is left out of both: it is the same with and without DP.
//
// Usage: meridian_bench_dp_step [--batch 256] [--steps 30] [--threads 1]
// Prints one JSON line: the median milliseconds of each kind of step and their ratio.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "models/conv2d.h"
#include "models/cpu_backend.h"
#include "models/flatten.h"
#include "models/group_norm.h"
#include "models/linear.h"
#include "models/max_pool2d.h"
#include "models/model.h"
#include "models/relu.h"
#include "models/split_mix64.h"
#include "models/thread_policy.h"
#include "privacy/dp_sgd.h"

using namespace meridian;
using models::Shape;

namespace {

// conv 1→16 k3 p1, GroupNorm(4), ReLU, max pool 2; conv 16→32 k3 p1, GroupNorm(4), ReLU, max pool 2;
// linear 1568→10: 20,586 parameters.
std::unique_ptr<models::Model> group_norm_cnn(std::shared_ptr<models::Backend> backend) {
  std::vector<std::unique_ptr<models::Layer>> l;
  l.push_back(std::make_unique<models::Conv2d>(Shape{1, 28, 28}, 16, 3, 1, 1, models::InitScheme::he));
  l.push_back(std::make_unique<models::GroupNorm>(Shape{16, 28, 28}, 4));
  l.push_back(std::make_unique<models::Relu>(Shape{16, 28, 28}));
  l.push_back(std::make_unique<models::MaxPool2d>(Shape{16, 28, 28}, 2, 2));
  l.push_back(std::make_unique<models::Conv2d>(Shape{16, 14, 14}, 32, 3, 1, 1, models::InitScheme::he));
  l.push_back(std::make_unique<models::GroupNorm>(Shape{32, 14, 14}, 4));
  l.push_back(std::make_unique<models::Relu>(Shape{32, 14, 14}));
  l.push_back(std::make_unique<models::MaxPool2d>(Shape{32, 14, 14}, 2, 2));
  l.push_back(std::make_unique<models::Flatten>(Shape{32, 7, 7}));
  l.push_back(std::make_unique<models::Linear>(32 * 7 * 7, 10, models::InitScheme::xavier));
  return std::make_unique<models::Model>("gn-cnn", std::move(l), 10, std::move(backend), 1);
}

template <typename Step>
double median_ms(std::size_t steps, Step step) {
  std::vector<double> ms;
  for (std::size_t i = 0; i < steps + 3; ++i) {
    const auto start = std::chrono::steady_clock::now();
    step();
    const double t = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    if (i >= 3) ms.push_back(t);  // the first steps fault in the buffers
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  std::size_t batch = 256, steps = 30, threads = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const std::size_t value = std::strtoul(argv[i + 1], nullptr, 10);
    if (flag == "--batch") batch = value;
    else if (flag == "--steps") steps = value;
    else if (flag == "--threads") threads = value;
    else {
      std::fprintf(stderr, "usage: %s [--batch 256] [--steps 30] [--threads 1]\n", argv[0]);
      return 2;
    }
  }
  auto backend = std::make_shared<models::CpuBackend>();
  auto model = group_norm_cnn(backend);
  models::use_threads(*model, *backend, threads);
  models::SplitMix64 random(3);
  std::vector<float> x(batch * model->input_size());
  for (float& v : x) v = random.uniform(1.0f);
  std::vector<std::int32_t> labels(batch);
  for (std::size_t i = 0; i < batch; ++i) labels[i] = static_cast<std::int32_t>(i % 10);

  privacy::DpSgdOptions options;
  options.clip = 1.0;
  options.noise_multiplier = 1.0;
  options.delta = 1e-5;
  privacy::DpSgd dp(options, 60000, batch, 0);
  const double plain = median_ms(steps, [&] { (void)model->forward_backward(x.data(), labels.data(), batch); });
  const double private_step = median_ms(steps, [&] { (void)dp.gradient(*model, x.data(), labels.data(), batch); });
  std::printf(
      "{\"network\": \"%s\", \"parameters\": %zu, \"batch\": %zu, \"threads\": %zu, \"steps\": %zu, "
      "\"plain_ms\": %.3f, \"dp_ms\": %.3f, \"ratio\": %.3f}\n",
      model->summary().c_str(), model->parameter_count(), batch, threads, steps, plain, private_step,
      private_step / plain);
  return 0;
}
