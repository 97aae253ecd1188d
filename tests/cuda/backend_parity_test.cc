// CudaBackend against the CPU reference (CpuBackend), operation by operation on the same random inputs,
// plus the Linear and ReLU layers run through each backend. Skipped, with the runtime's reason, where
// there is no CUDA device.
//
// Error bounds (fp32, u = 2⁻²⁴), and why:
// - exact (bit-equal): im2col, col2im, bias broadcast and fill, column sums, max pooling forward and
//   backward, ReLU, argmax, push-sum scale/add, delayed compensation. The kernels add in the CPU's order
//   and these operations have no multiply-add that the compilers could fuse differently.
// - GEMM: both sides are within γ_{k+2}·(|α|·(|A|·|B|)ᵢⱼ + |β|·|c0ᵢⱼ|) of the exact result
//   (γ_n = n·u/(1−n·u)), so they differ by at most twice that.
// - row and channel sums: the GPU's tree and the CPU's blocked sum each err by at most γ_n·Σ|m|; twice that.
// - softmax cross-entropy: CUDA's expf/logf are within 2 ulp (glibc's within 1), so dlogits and the loss
//   get a relative bound of 1e-5.
// - optimizer updates: nvcc fuses multiply-adds (FMA) where the x86-64 build rounds twice, so results
//   differ by a few ulp of the operands (which are ≤ 1 here, and may cancel): 1e-6·max(|value|, 1) for
//   SGD and momentum; for Adam 1e-5 relative (the second moment has no cancellation), with floors of
//   0.1 for the first moment and 1e-3 for the weights, whose steps are ~lr = 1e-3.
// - layers: GEMM-bound, 1e-4 relative to max(|value|, 1) for k ≤ 40 and operands ≤ 1.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "cuda/cuda_backend.h"
#include "cuda/device_buffer.h"
#include "models/cpu_backend.h"
#include "models/linear.h"
#include "models/relu.h"
#include "tests/cuda/skip_without_device.h"

using meridian::cuda::CudaBackend;
using meridian::cuda::DeviceBuffer;
using meridian::models::ConvGeometry;
using meridian::models::CpuBackend;
using meridian::models::PoolGeometry;

namespace {

constexpr double kU = 1.0 / (1 << 24);

double gamma(std::size_t n) { return n * kU / (1 - n * kU); }

std::vector<float> random_floats(std::size_t n, std::mt19937& rng, float lo = -1.0f, float hi = 1.0f) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

template <typename T>
DeviceBuffer<T> upload(const std::vector<T>& host, CudaBackend& gpu) {
  DeviceBuffer<T> device(host.size());
  device.copy_from_host(host, gpu.stream());
  return device;
}

template <typename T>
std::vector<T> download(const DeviceBuffer<T>& device, CudaBackend& gpu) {
  std::vector<T> host(device.size());
  device.copy_to_host(host, gpu.stream());
  gpu.synchronize();
  return host;
}

template <typename T>
void require_equal(const std::vector<T>& gpu, const std::vector<T>& cpu) {
  REQUIRE(gpu.size() == cpu.size());
  for (std::size_t i = 0; i < cpu.size(); ++i) {
    INFO("element " << i);
    REQUIRE(gpu[i] == cpu[i]);
  }
}

// |gpu − cpu| ≤ rel · max(|cpu|, floor), element by element.
void require_close(const std::vector<float>& gpu, const std::vector<float>& cpu, double rel, double floor) {
  REQUIRE(gpu.size() == cpu.size());
  for (std::size_t i = 0; i < cpu.size(); ++i) {
    INFO("element " << i << ": gpu " << gpu[i] << " cpu " << cpu[i]);
    REQUIRE(std::abs(static_cast<double>(gpu[i]) - cpu[i]) <= rel * std::max<double>(std::abs(cpu[i]), floor));
  }
}

}  // namespace

TEST_CASE("CUDA gemm matches OpenBLAS within the fp32 bound for every transpose", "[cuda][parity][unit]") {
  MERIDIAN_SKIP_WITHOUT_CUDA_DEVICE();
  CpuBackend cpu;
  CudaBackend gpu;
  std::mt19937 rng(1);
  const std::size_t m = 37, n = 53, k = 300;
  const float alpha = 0.5f, beta = 2.0f;
  for (const bool ta : {false, true}) {
    for (const bool tb : {false, true}) {
      INFO("transpose_a " << ta << " transpose_b " << tb);
      const std::size_t lda = ta ? m : k, ldb = tb ? k : n;
      const auto a = random_floats(m * k, rng), b = random_floats(k * n, rng), c0 = random_floats(m * n, rng);
      std::vector<float> c_cpu = c0;
      cpu.gemm(ta, tb, m, n, k, alpha, a.data(), lda, b.data(), ldb, beta, c_cpu.data(), n);
      auto da = upload(a, gpu), db = upload(b, gpu), dc = upload(c0, gpu);
      gpu.gemm(ta, tb, m, n, k, alpha, da.data(), lda, db.data(), ldb, beta, dc.data(), n);
      const auto c_gpu = download(dc, gpu);
      for (std::size_t i = 0; i < m; ++i) {
        for (std::size_t j = 0; j < n; ++j) {
          double magnitude = 0.0;
          for (std::size_t l = 0; l < k; ++l) {
            magnitude += std::abs(static_cast<double>(ta ? a[l * lda + i] : a[i * lda + l]) *
                                  (tb ? b[j * ldb + l] : b[l * ldb + j]));
          }
          const double bound = 2 * gamma(k + 2) * (alpha * magnitude + beta * std::abs(c0[i * n + j])) + 1e-30;
          REQUIRE(std::abs(static_cast<double>(c_gpu[i * n + j]) - c_cpu[i * n + j]) <= bound);
        }
      }
    }
  }
}

TEST_CASE("CUDA im2col and col2im equal the CPU's bit for bit", "[cuda][parity][unit]") {
  MERIDIAN_SKIP_WITHOUT_CUDA_DEVICE();
  CpuBackend cpu;
  CudaBackend gpu;
  std::mt19937 rng(2);
  // LeNet's first layer (pad 2), and a strided, unpadded one whose windows skip pixels.
  for (const ConvGeometry g : {ConvGeometry{1, 28, 28, 5, 1, 2}, ConvGeometry{3, 11, 9, 3, 2, 0}}) {
    const std::size_t batch = 3, pixels = g.out_height() * g.out_width();
    const std::size_t image_floats = batch * g.in_channels * g.in_height * g.in_width;
    const std::size_t column_floats = g.patch_size() * batch * pixels;

    const auto images = random_floats(image_floats, rng);
    std::vector<float> columns_cpu(column_floats);
    cpu.im2col(g, batch, images.data(), columns_cpu.data());
    auto d_images = upload(images, gpu);
    DeviceBuffer<float> d_columns(column_floats);
    gpu.im2col(g, batch, d_images.data(), d_columns.data());
    require_equal(download(d_columns, gpu), columns_cpu);

    const auto columns = random_floats(column_floats, rng);
    std::vector<float> back_cpu(image_floats);
    cpu.col2im(g, batch, columns.data(), back_cpu.data());
    auto d_back = upload(columns, gpu);
    gpu.col2im(g, batch, d_back.data(), d_images.data());
    require_equal(download(d_images, gpu), back_cpu);
  }
}

TEST_CASE("CUDA max pooling equals the CPU's, ties and overlapping windows included", "[cuda][parity][unit]") {
  MERIDIAN_SKIP_WITHOUT_CUDA_DEVICE();
  CpuBackend cpu;
  CudaBackend gpu;
  std::mt19937 rng(3);
  for (const PoolGeometry g : {PoolGeometry{6, 28, 28, 2, 2}, PoolGeometry{2, 9, 7, 3, 2}}) {
    const std::size_t batch = 3, in_floats = batch * g.channels * g.in_height * g.in_width;
    const std::size_t out_floats = batch * g.channels * g.out_height() * g.out_width();
    // Values from a small set so that windows contain ties.
    std::vector<float> in(in_floats);
    std::uniform_int_distribution<int> level(0, 3);
    for (float& x : in) x = static_cast<float>(level(rng));
    const auto dout = random_floats(out_floats, rng);
    std::vector<float> out_cpu(out_floats), din_cpu(in_floats);
    std::vector<std::int32_t> argmax_cpu(out_floats);
    cpu.max_pool_forward(g, batch, in.data(), out_cpu.data(), argmax_cpu.data());
    cpu.max_pool_backward(g, batch, dout.data(), argmax_cpu.data(), din_cpu.data());

    auto d_in = upload(in, gpu), d_dout = upload(dout, gpu);
    DeviceBuffer<float> d_out(out_floats), d_din(in_floats);
    DeviceBuffer<std::int32_t> d_argmax(out_floats);
    gpu.max_pool_forward(g, batch, d_in.data(), d_out.data(), d_argmax.data());
    gpu.max_pool_backward(g, batch, d_dout.data(), d_argmax.data(), d_din.data());
    require_equal(download(d_out, gpu), out_cpu);
    require_equal(download(d_argmax, gpu), argmax_cpu);
    require_equal(download(d_din, gpu), din_cpu);
  }
}

TEST_CASE("CUDA broadcasts, fills and sums match the CPU", "[cuda][parity][unit]") {
  MERIDIAN_SKIP_WITHOUT_CUDA_DEVICE();
  CpuBackend cpu;
  CudaBackend gpu;
  std::mt19937 rng(4);
  const std::size_t rows = 6, cols = 64 * 784;
  const auto m = random_floats(rows * cols, rng), bias = random_floats(cols, rng), values = random_floats(rows, rng);
  auto d_m = upload(m, gpu), d_bias = upload(bias, gpu), d_values = upload(values, gpu);

  std::vector<float> broadcast_cpu(rows * cols), filled_cpu(rows * cols);
  cpu.broadcast_rows(rows, cols, bias.data(), broadcast_cpu.data());
  cpu.fill_rows(rows, cols, values.data(), filled_cpu.data());
  DeviceBuffer<float> d_broadcast(rows * cols), d_filled(rows * cols);
  gpu.broadcast_rows(rows, cols, d_bias.data(), d_broadcast.data());
  gpu.fill_rows(rows, cols, d_values.data(), d_filled.data());
  require_equal(download(d_broadcast, gpu), broadcast_cpu);
  require_equal(download(d_filled, gpu), filled_cpu);

  std::vector<float> column_cpu(cols), row_cpu(rows);
  cpu.sum(rows, cols, m.data(), false, column_cpu.data());
  cpu.sum(rows, cols, m.data(), true, row_cpu.data());
  DeviceBuffer<float> d_column(cols), d_row(rows);
  gpu.sum(rows, cols, d_m.data(), false, d_column.data());
  gpu.sum(rows, cols, d_m.data(), true, d_row.data());
  require_equal(download(d_column, gpu), column_cpu);
  const auto row_gpu = download(d_row, gpu);
  for (std::size_t r = 0; r < rows; ++r) {
    double magnitude = 0.0;
    for (std::size_t c = 0; c < cols; ++c) magnitude += std::abs(m[r * cols + c]);
    REQUIRE(std::abs(static_cast<double>(row_gpu[r]) - row_cpu[r]) <= 2 * gamma(cols) * magnitude);
  }

  // The conv bias gradient: (batch 64, channels 6, pixels 784) summed per channel.
  const std::size_t batch = 64, channels = 6, pixels = 784;
  std::vector<float> channel_cpu(channels);
  cpu.sum_channels(batch, channels, pixels, m.data(), channel_cpu.data());
  DeviceBuffer<float> d_channel(channels);
  gpu.sum_channels(batch, channels, pixels, d_m.data(), d_channel.data());
  const auto channel_gpu = download(d_channel, gpu);
  for (std::size_t c = 0; c < channels; ++c) {
    double magnitude = 0.0;
    for (std::size_t b = 0; b < batch; ++b)
      for (std::size_t p = 0; p < pixels; ++p) magnitude += std::abs(m[(b * channels + c) * pixels + p]);
    REQUIRE(std::abs(static_cast<double>(channel_gpu[c]) - channel_cpu[c]) <= 2 * gamma(batch * pixels) * magnitude);
  }
}

TEST_CASE("CUDA ReLU, softmax cross-entropy and argmax match the CPU", "[cuda][parity][unit]") {
  MERIDIAN_SKIP_WITHOUT_CUDA_DEVICE();
  CpuBackend cpu;
  CudaBackend gpu;
  std::mt19937 rng(5);
  const std::size_t n = 10000;
  const auto x = random_floats(n, rng), dy = random_floats(n, rng);
  std::vector<float> y_cpu(n), dx_cpu(n);
  cpu.relu_forward(n, x.data(), y_cpu.data());
  cpu.relu_backward(n, y_cpu.data(), dy.data(), dx_cpu.data());
  auto d_x = upload(x, gpu), d_dy = upload(dy, gpu);
  DeviceBuffer<float> d_y(n), d_dx(n);
  gpu.relu_forward(n, d_x.data(), d_y.data());
  gpu.relu_backward(n, d_y.data(), d_dy.data(), d_dx.data());
  require_equal(download(d_y, gpu), y_cpu);
  require_equal(download(d_dx, gpu), dx_cpu);

  const std::size_t batch = 64, classes = 10;
  const auto logits = random_floats(batch * classes, rng, -8.0f, 8.0f);
  std::vector<std::int32_t> labels(batch);
  for (std::size_t b = 0; b < batch; ++b) labels[b] = static_cast<std::int32_t>((b * 7) % classes);
  std::vector<float> dlogits_cpu(batch * classes);
  const float loss_cpu = cpu.softmax_cross_entropy(batch, classes, logits.data(), labels.data(), dlogits_cpu.data());
  auto d_logits = upload(logits, gpu);
  auto d_labels = upload(labels, gpu);
  DeviceBuffer<float> d_dlogits(batch * classes);
  const float loss_gpu = gpu.softmax_cross_entropy(batch, classes, d_logits.data(), d_labels.data(), d_dlogits.data());
  CHECK(std::abs(loss_gpu - loss_cpu) <= 1e-5 * std::abs(loss_cpu));
  require_close(download(d_dlogits, gpu), dlogits_cpu, 1e-5, 1e-2);

  std::vector<std::int32_t> predicted_cpu(batch);
  cpu.argmax_rows(batch, classes, logits.data(), predicted_cpu.data());
  DeviceBuffer<std::int32_t> d_predicted(batch);
  gpu.argmax_rows(batch, classes, d_logits.data(), d_predicted.data());
  require_equal(download(d_predicted, gpu), predicted_cpu);

  labels[17] = static_cast<std::int32_t>(classes);
  auto d_bad = upload(labels, gpu);
  CHECK_THROWS_WITH(gpu.softmax_cross_entropy(batch, classes, d_logits.data(), d_bad.data(), d_dlogits.data()),
                    "softmax_cross_entropy: label 10 of sample 17 is outside [0, 10)");
}

TEST_CASE("CUDA optimizer updates and mixing primitives match the CPU", "[cuda][parity][unit]") {
  MERIDIAN_SKIP_WITHOUT_CUDA_DEVICE();
  CpuBackend cpu;
  CudaBackend gpu;
  std::mt19937 rng(6);
  const std::size_t n = 4097;
  const auto w0 = random_floats(n, rng), g = random_floats(n, rng), m0 = random_floats(n, rng, -0.1f, 0.1f);
  const auto v0 = random_floats(n, rng, 0.0f, 0.01f), other = random_floats(n, rng), snap = random_floats(n, rng);
  auto d_g = upload(g, gpu), d_other = upload(other, gpu), d_snap = upload(snap, gpu);

  SECTION("sgd") {
    std::vector<float> w = w0;
    auto d_w = upload(w0, gpu);
    for (int step = 0; step < 3; ++step) {
      cpu.sgd_update(n, w.data(), g.data(), 0.1f, 1e-4f);
      gpu.sgd_update(n, d_w.data(), d_g.data(), 0.1f, 1e-4f);
    }
    require_close(download(d_w, gpu), w, 1e-6, 1.0);
  }
  SECTION("heavy-ball momentum") {
    std::vector<float> w = w0, u = m0;
    auto d_w = upload(w0, gpu), d_u = upload(m0, gpu);
    for (int step = 0; step < 3; ++step) {
      cpu.momentum_update(n, w.data(), u.data(), g.data(), 0.1f, 0.9f, 1e-4f, false);
      gpu.momentum_update(n, d_w.data(), d_u.data(), d_g.data(), 0.1f, 0.9f, 1e-4f, false);
    }
    require_close(download(d_w, gpu), w, 1e-6, 1.0);
    require_close(download(d_u, gpu), u, 1e-6, 1.0);
  }
  SECTION("nesterov momentum") {
    std::vector<float> w = w0, u = m0;
    auto d_w = upload(w0, gpu), d_u = upload(m0, gpu);
    for (int step = 0; step < 3; ++step) {
      cpu.momentum_update(n, w.data(), u.data(), g.data(), 0.1f, 0.9f, 1e-4f, true);
      gpu.momentum_update(n, d_w.data(), d_u.data(), d_g.data(), 0.1f, 0.9f, 1e-4f, true);
    }
    require_close(download(d_w, gpu), w, 1e-6, 1.0);
    require_close(download(d_u, gpu), u, 1e-6, 1.0);
  }
  SECTION("adam") {
    std::vector<float> w = w0, m = m0, v = v0;
    auto d_w = upload(w0, gpu), d_m = upload(m0, gpu), d_v = upload(v0, gpu);
    for (int t = 1; t <= 3; ++t) {
      const float c1 = 1.0f - std::pow(0.9f, static_cast<float>(t)),
                  c2 = 1.0f - std::pow(0.999f, static_cast<float>(t));
      cpu.adam_update(n, w.data(), m.data(), v.data(), g.data(), 1e-3f, 0.9f, 0.999f, 1e-8f, 0.0f, c1, c2);
      gpu.adam_update(n, d_w.data(), d_m.data(), d_v.data(), d_g.data(), 1e-3f, 0.9f, 0.999f, 1e-8f, 0.0f, c1, c2);
    }
    require_close(download(d_w, gpu), w, 1e-5, 1e-3);
    require_close(download(d_m, gpu), m, 1e-5, 0.1);
    require_close(download(d_v, gpu), v, 1e-5, 1e-6);
  }
  SECTION("push-sum and delayed compensation") {
    std::vector<float> x = w0;
    auto d_x = upload(w0, gpu);
    cpu.push_sum_scale(n, x.data(), 1.0f / 3.0f);
    cpu.push_sum_add(n, x.data(), other.data());
    cpu.delayed_compensation(n, x.data(), other.data(), snap.data());
    gpu.push_sum_scale(n, d_x.data(), 1.0f / 3.0f);
    gpu.push_sum_add(n, d_x.data(), d_other.data());
    gpu.delayed_compensation(n, d_x.data(), d_other.data(), d_snap.data());
    require_equal(download(d_x, gpu), x);
  }
}

TEST_CASE("Linear and ReLU layers give the CPU's outputs and gradients on the GPU", "[cuda][parity][unit]") {
  MERIDIAN_SKIP_WITHOUT_CUDA_DEVICE();
  using namespace meridian::models;
  CpuBackend cpu;
  CudaBackend gpu;
  std::mt19937 rng(7);
  const std::size_t batch = 16, in = 40, out = 24;
  Linear cpu_layer(in, out, InitScheme::he), gpu_layer(in, out, InitScheme::he);
  const auto params = random_floats(cpu_layer.parameter_count(), rng);
  std::vector<float> params_cpu = params, grads_cpu(params.size());
  cpu_layer.bind(params_cpu, grads_cpu);
  auto d_params = upload(params, gpu);
  DeviceBuffer<float> d_grads(params.size());
  // Spans over device memory: Linear only hands their pointers to the backend.
  gpu_layer.bind({d_params.data(), d_params.size()}, {d_grads.data(), d_grads.size()});

  const auto x = random_floats(batch * in, rng), dy = random_floats(batch * out, rng);
  Relu cpu_relu({out, 1, 1}), gpu_relu({out, 1, 1});
  std::vector<float> y_cpu(batch * out), r_cpu(batch * out), dr_cpu(batch * out), dx_cpu(batch * in);
  cpu_layer.forward(cpu, x.data(), y_cpu.data(), batch);
  cpu_relu.forward(cpu, y_cpu.data(), r_cpu.data(), batch);
  cpu_relu.backward(cpu, y_cpu.data(), r_cpu.data(), dy.data(), dr_cpu.data(), batch);
  cpu_layer.backward(cpu, x.data(), y_cpu.data(), dr_cpu.data(), dx_cpu.data(), batch);

  auto d_x = upload(x, gpu), d_dy = upload(dy, gpu);
  DeviceBuffer<float> d_y(batch * out), d_r(batch * out), d_dr(batch * out), d_dx(batch * in);
  gpu_layer.forward(gpu, d_x.data(), d_y.data(), batch);
  gpu_relu.forward(gpu, d_y.data(), d_r.data(), batch);
  gpu_relu.backward(gpu, d_y.data(), d_r.data(), d_dy.data(), d_dr.data(), batch);
  gpu_layer.backward(gpu, d_x.data(), d_y.data(), d_dr.data(), d_dx.data(), batch);

  require_close(download(d_y, gpu), y_cpu, 1e-4, 1.0);
  require_close(download(d_dx, gpu), dx_cpu, 1e-4, 1.0);
  require_close(download(d_grads, gpu), grads_cpu, 1e-4, 1.0);
}
