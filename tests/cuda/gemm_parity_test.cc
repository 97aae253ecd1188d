// Row-major cuBLAS GEMM against a double-precision CPU reference, for every transpose combination and
// sizes that are not multiples of any tile.
//
// Error bound (fp32, no TF32): for any summation order, |c − c_ref| ≤ γ_{k+2} · (|α|·(|A|·|B|)_ij + |β|·|c0|)
// with γ_n = n·u/(1 − n·u), u = 2⁻²⁴ (k products and sums, the scaling by α and the final addition of
// β·c0). The test allows twice that.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <vector>

#include "cuda/blas_handle.h"
#include "cuda/device_buffer.h"
#include "cuda/gemm.h"
#include "cuda/stream.h"
#include "error/error.h"
#include "tests/cuda/skip_without_device.h"

using namespace meridian::cuda;

TEST_CASE("gemm rejects bad sizes before touching the device", "[cuda][gemm][unit]") {
  CHECK_THROWS_AS(
      gemm(nullptr, Transpose::kNo, Transpose::kNo, -1, 2, 2, 1.0f, nullptr, 2, nullptr, 2, 0.0f, nullptr, 2),
      meridian::error::InternalError);
  CHECK_THROWS_WITH(
      gemm(nullptr, Transpose::kNo, Transpose::kNo, 2, 3, 4, 1.0f, nullptr, 3, nullptr, 3, 0.0f, nullptr, 3),
      Catch::Matchers::Contains("cuda/gemm.cc:") &&
          Catch::Matchers::EndsWith(": gemm: lda = 3 is smaller than a row of 4 elements"));
  CHECK_THROWS_WITH(
      gemm(nullptr, Transpose::kYes, Transpose::kNo, 2, 3, 4, 1.0f, nullptr, 2, nullptr, 3, 0.0f, nullptr, 2),
      Catch::Matchers::Contains("cuda/gemm.cc:") &&
          Catch::Matchers::EndsWith(": gemm: ldc = 2 is smaller than a row of 3 elements"));
  // An empty product enqueues nothing.
  CHECK_NOTHROW(gemm(nullptr, Transpose::kNo, Transpose::kNo, 0, 3, 4, 1.0f, nullptr, 4, nullptr, 3, 0.0f, nullptr, 3));
}

TEST_CASE("row-major cuBLAS gemm matches the CPU reference", "[cuda][gemm][parity][unit]") {
  MERIDIAN_SKIP_WITHOUT_CUDA_DEVICE();
  Stream stream;
  BlasHandle blas(stream.get());
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  constexpr double u = 1.0 / (1 << 24);

  for (const auto [m, n, k] :
       {std::array{1, 1, 1}, std::array{7, 13, 29}, std::array{64, 10, 784}, std::array{33, 65, 130}}) {
    for (const Transpose ta : {Transpose::kNo, Transpose::kYes}) {
      for (const Transpose tb : {Transpose::kNo, Transpose::kYes}) {
        const bool at = ta == Transpose::kYes, bt = tb == Transpose::kYes;
        INFO("m=" << m << " n=" << n << " k=" << k << " transA=" << at << " transB=" << bt);
        const int lda = at ? m : k, ldb = bt ? k : n, ldc = n;
        std::vector<float> a(static_cast<std::size_t>(m) * k), b(static_cast<std::size_t>(k) * n),
            c(static_cast<std::size_t>(m) * n);
        for (auto* v : {&a, &b, &c})
          for (float& x : *v) x = uniform(rng);
        const float alpha = 0.75f, beta = -0.5f;

        DeviceBuffer<float> da(a.size()), db(b.size()), dc(c.size());
        da.copy_from_host(a, stream.get());
        db.copy_from_host(b, stream.get());
        dc.copy_from_host(c, stream.get());
        gemm(blas.get(), ta, tb, m, n, k, alpha, da.data(), lda, db.data(), ldb, beta, dc.data(), ldc);
        std::vector<float> got(c.size());
        dc.copy_to_host(got, stream.get());
        stream.synchronize();

        const double gamma = (k + 2) * u / (1 - (k + 2) * u);
        for (int i = 0; i < m; ++i) {
          for (int j = 0; j < n; ++j) {
            double exact = 0.0, magnitude = 0.0;
            for (int l = 0; l < k; ++l) {
              const double x = at ? a[l * lda + i] : a[i * lda + l];
              const double y = bt ? b[j * ldb + l] : b[l * ldb + j];
              exact += x * y;
              magnitude += std::abs(x * y);
            }
            const double c0 = c[i * ldc + j];
            const double want = alpha * exact + beta * c0;
            const double bound = 2 * gamma * (std::abs(alpha) * magnitude + std::abs(beta) * std::abs(c0)) + 1e-30;
            REQUIRE(std::abs(got[i * ldc + j] - want) <= bound);
          }
        }
      }
    }
  }
}
