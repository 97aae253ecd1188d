// The implicit GEMM convolution against im2col + OpenBLAS, which the finite-difference and PyTorch tests
// pin down: the same outputs and gradients for strided, padded and unpadded geometries, channel counts that
// are not multiples of its register blocks and widths that end mid column block.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "error/error.h"
#include "models/cpu_backend.h"
#include "models/im2col_convolution.h"
#include "models/implicit_gemm_convolution.h"
#include "models/split_mix64.h"

using namespace meridian::models;

namespace {

std::vector<float> random_vector(std::size_t n, SplitMix64& random) {
  std::vector<float> v(n);
  for (float& x : v) x = random.uniform(1.0f);
  return v;
}

// Largest |a − b| relative to the largest |b|.
double relative_difference(const std::vector<float>& a, const std::vector<float>& b) {
  double worst = 0.0, scale = 1e-12;
  for (std::size_t i = 0; i < a.size(); ++i) {
    worst = std::max(worst, std::abs(static_cast<double>(a[i]) - b[i]));
    scale = std::max(scale, std::abs(static_cast<double>(b[i])));
  }
  return worst / scale;
}

}  // namespace

TEST_CASE("implicit GEMM convolution matches im2col + GEMM", "[models][convolution][unit]") {
  if (!ImplicitGemmConvolution::supports(ConvGeometry{1, 8, 8, 3, 1, 1})) {
    WARN("SKIPPED: this CPU lacks AVX2 or FMA, so the CPU backend uses im2col");
    return;
  }
  struct Case {
    std::size_t in_c, h, w, out_c, k, stride, padding, batch;
  };
  // resnet8's convolutions, the LeNet CNN's, then odd sizes, strides and paddings.
  const std::vector<Case> cases{
      {1, 28, 28, 16, 3, 1, 1, 3},  {16, 28, 28, 16, 3, 1, 1, 2}, {16, 28, 28, 32, 3, 2, 1, 2},
      {16, 28, 28, 32, 1, 2, 0, 2}, {32, 14, 14, 32, 3, 1, 1, 2}, {32, 14, 14, 64, 3, 2, 1, 2},
      {32, 14, 14, 64, 1, 2, 0, 2}, {64, 7, 7, 64, 3, 1, 1, 2},   {1, 28, 28, 6, 5, 1, 2, 2},
      {6, 14, 14, 16, 5, 1, 0, 2},  {3, 5, 9, 7, 3, 1, 1, 3},     {5, 11, 6, 6, 5, 1, 2, 2},
      {2, 1, 1, 3, 3, 1, 1, 2},     {3, 9, 7, 5, 3, 2, 1, 2},     {4, 10, 11, 3, 5, 3, 2, 2},
      {2, 8, 8, 5, 2, 2, 0, 2},     {3, 6, 7, 4, 1, 1, 0, 2},     {2, 7, 9, 3, 4, 3, 1, 2}};
  CpuBackend backend;
  for (const Case& c : cases) {
    const ConvGeometry g{c.in_c, c.h, c.w, c.k, c.stride, c.padding};
    INFO("in " << c.in_c << "x" << c.h << "x" << c.w << ", out " << c.out_c << ", kernel " << c.k << ", stride "
               << c.stride << ", padding " << c.padding << ", batch " << c.batch);
    REQUIRE(ImplicitGemmConvolution::supports(g));
    SplitMix64 random(c.in_c * 131 + c.h * 7 + c.k);
    const std::size_t in_size = c.batch * c.in_c * c.h * c.w;
    const std::size_t out_size = c.batch * c.out_c * g.out_height() * g.out_width();
    const auto x = random_vector(in_size, random), dout = random_vector(out_size, random);
    const auto weight = random_vector(c.out_c * g.patch_size(), random), bias = random_vector(c.out_c, random);
    ImplicitGemmConvolution implicit(backend, g, c.out_c);
    Im2colConvolution reference(backend, g, c.out_c);
    std::vector<float> out(out_size), ref_out(out_size), din(in_size, 7.0f), ref_din(in_size);
    std::vector<float> dweight(weight.size(), 7.0f), ref_dweight(weight.size()), dbias(c.out_c), ref_dbias(c.out_c);
    // Twice, so that stale workspace contents from the first pass would show in the second.
    for (int pass = 0; pass < 2; ++pass) {
      implicit.forward(c.batch, x.data(), weight.data(), bias.data(), out.data());
      implicit.backward(c.batch, x.data(), dout.data(), weight.data(), dweight.data(), dbias.data(), din.data());
    }
    reference.forward(c.batch, x.data(), weight.data(), bias.data(), ref_out.data());
    reference.backward(c.batch, x.data(), dout.data(), weight.data(), ref_dweight.data(), ref_dbias.data(),
                       ref_din.data());
    CHECK(relative_difference(out, ref_out) < 1e-5);
    CHECK(relative_difference(dweight, ref_dweight) < 1e-5);
    CHECK(relative_difference(dbias, ref_dbias) < 1e-5);
    CHECK(relative_difference(din, ref_din) < 1e-5);
  }
}

TEST_CASE("implicit GEMM convolution refuses a kernel that does not fit", "[models][convolution][unit]") {
  CHECK_FALSE(ImplicitGemmConvolution::supports(ConvGeometry{3, 4, 8, 7, 1, 1}));
  CHECK_FALSE(ImplicitGemmConvolution::supports(ConvGeometry{3, 8, 8, 0, 1, 0}));
  CpuBackend backend;
  CHECK_THROWS_AS(ImplicitGemmConvolution(backend, ConvGeometry{3, 4, 8, 7, 1, 1}, 4), meridian::error::InternalError);
}
