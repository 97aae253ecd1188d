// models/elementwise_math.h is shared with the CUDA kernels (cuda/kernels.cu): this compiles a kernel that
// calls every function with nvcc, when nvcc is installed, so the header cannot drift into something
// only the host compiler accepts.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "tests/support/build_paths.h"
#include "tests/support/temp_dir.h"

TEST_CASE("elementwise_math.h compiles as CUDA device code", "[models][cuda][process]") {
  const std::string nvcc = meridian::tests::nvcc_path();
  if (nvcc.empty() || !std::filesystem::exists(nvcc)) {
    WARN("SKIPPED: nvcc not found (looked on PATH, $CUDA_PATH, $CUDA_HOME and /usr/local/cuda/bin)");
    return;
  }
  const meridian::tests::TempDir tmp;
  const auto& dir = tmp.path();
  {
    std::ofstream cu(dir / "kernel.cu");
    cu << R"(#include "models/elementwise_math.h"
namespace m = meridian::models::math;
__global__ void every_function(float* w, float* u, float* v, const float* g, float* d, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  w[i] = m::relu(w[i]) + m::relu_backward(w[i], g[i]);
  if (i == 0) w[0] += m::softmax_cross_entropy_row(g, n, 0, 1.0f, d);
  m::sgd_update(w[i], g[i], 0.1f, 0.0f);
  m::momentum_update(w[i], u[i], g[i], 0.1f, 0.9f, 0.0f, true);
  m::adam_update(w[i], u[i], v[i], g[i], 0.1f, 0.9f, 0.999f, 1e-8f, 0.0f, 0.1f, 0.001f);
  m::push_sum_scale(w[i], 0.5f);
  m::push_sum_add(w[i], g[i]);
  m::delayed_compensation(w[i], g[i], u[i]);
  w[i] += m::gelu(w[i]) + m::gelu_backward(w[i], g[i]) + m::tanh_forward(w[i]) + m::tanh_backward(w[i], g[i]);
  w[i] += m::sigmoid(w[i]) + m::sigmoid_backward(w[i], g[i]) + m::running_update(w[i], g[i], 0.1f);
  w[i] += m::normalize(w[i], g[i], m::inverse_std(u[i] * u[i], 1e-5f), 1.0f, 0.0f) +
          m::normalization_input_gradient(g[i], w[i], 1.0f, 0.5f, 0.25f);
  w[i] = m::dropout(w[i], m::dropout_keep(42ULL, static_cast<unsigned long long>(i), 0.5f), 2.0f);
}
)";
  }
  const std::string command = nvcc + " -std=c++20 -I" + meridian::tests::source_dir() + " -c " +
                              (dir / "kernel.cu").string() + " -o " + (dir / "kernel.o").string() + " 2>&1";
  const int status = std::system(command.c_str());
  const bool built = std::filesystem::exists(dir / "kernel.o");
  INFO(command);
  CHECK(status == 0);
  CHECK(built);
}
