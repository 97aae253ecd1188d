#include "models/offset_gemm.h"

#include <immintrin.h>

#include "error/error.h"

// The kernels are compiled for AVX2 + FMA through the target attribute rather than a global -mavx2, so
// the rest of the binary still runs on any x86-64 and available() decides at run time.
#define MERIDIAN_AVX2 __attribute__((target("avx2,fma")))

namespace meridian::models::offset_gemm {

bool available() {
  static const bool yes = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  }();
  return yes;
}

namespace {

// c[r][0..24) for R rows: 3 × R accumulators stay in registers for the whole k loop; each step loads
// one 24-wide window of B and broadcasts R values of a.
template <int R>
MERIDIAN_AVX2 void multiply_block(std::size_t k, const float* a, std::size_t lda, const float* base,
                                  const std::int32_t* offsets, float* c, std::size_t ldc) {
  __m256 acc[R][3];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = acc[r][2] = _mm256_setzero_ps();
  for (std::size_t kk = 0; kk < k; ++kk) {
    const float* b = base + offsets[kk];
    const __m256 b0 = _mm256_loadu_ps(b), b1 = _mm256_loadu_ps(b + 8), b2 = _mm256_loadu_ps(b + 16);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const __m256 av = _mm256_broadcast_ss(a + r * lda + kk);
      acc[r][0] = _mm256_fmadd_ps(av, b0, acc[r][0]);
      acc[r][1] = _mm256_fmadd_ps(av, b1, acc[r][1]);
      acc[r][2] = _mm256_fmadd_ps(av, b2, acc[r][2]);
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
    _mm256_storeu_ps(c + r * ldc, acc[r][0]);
    _mm256_storeu_ps(c + r * ldc + 8, acc[r][1]);
    _mm256_storeu_ps(c + r * ldc + 16, acc[r][2]);
  }
}

MERIDIAN_AVX2 inline float horizontal_sum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// c[r][s] += Σ_j a[r][j] · B[s][j] for R rows of a and S rows of B: R × S vector sums over the
// reduction, added up across their lanes at the end.
template <int R, int S>
MERIDIAN_AVX2 void transposed_block(std::size_t n, const float* a, std::size_t lda, const float* base,
                                    const std::int32_t* offsets, float* c, std::size_t ldc) {
  __m256 acc[R][S];
  const float* b[S];
#pragma GCC unroll 4
  for (int s = 0; s < S; ++s) b[s] = base + offsets[s];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int s = 0; s < S; ++s) acc[r][s] = _mm256_setzero_ps();
  for (std::size_t j = 0; j < n; j += kReductionStep) {
    __m256 bv[S];
#pragma GCC unroll 4
    for (int s = 0; s < S; ++s) bv[s] = _mm256_loadu_ps(b[s] + j);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const __m256 av = _mm256_loadu_ps(a + r * lda + j);
#pragma GCC unroll 4
      for (int s = 0; s < S; ++s) acc[r][s] = _mm256_fmadd_ps(av, bv[s], acc[r][s]);
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int s = 0; s < S; ++s) c[r * ldc + s] += horizontal_sum(acc[r][s]);
}

template <int R>
void transposed_rows(std::size_t n, std::size_t k, const float* a, std::size_t lda, const float* base,
                     const std::int32_t* offsets, float* c, std::size_t ldc) {
  std::size_t kk = 0;
  for (; kk + 3 <= k; kk += 3) transposed_block<R, 3>(n, a, lda, base, offsets + kk, c + kk, ldc);
  if (k - kk == 2) transposed_block<R, 2>(n, a, lda, base, offsets + kk, c + kk, ldc);
  if (k - kk == 1) transposed_block<R, 1>(n, a, lda, base, offsets + kk, c + kk, ldc);
}

}  // namespace

void multiply(std::size_t m, std::size_t n, std::size_t k, const float* a, std::size_t lda, const float* base,
              const std::int32_t* offsets, float* c, std::size_t ldc) {
  if (!available()) throw error::InternalError("offset_gemm::multiply needs AVX2 and FMA");
  // Column blocks outside, row blocks inside: the 24-wide windows of B that a column block reads stay in
  // L1 while every row block of a passes over them.
  for (std::size_t j = 0; j < n; j += kColumnBlock) {
    std::size_t r = 0;
    for (; r + 4 <= m; r += 4) multiply_block<4>(k, a + r * lda, lda, base + j, offsets, c + r * ldc + j, ldc);
    switch (m - r) {
      case 3: multiply_block<3>(k, a + r * lda, lda, base + j, offsets, c + r * ldc + j, ldc); break;
      case 2: multiply_block<2>(k, a + r * lda, lda, base + j, offsets, c + r * ldc + j, ldc); break;
      case 1: multiply_block<1>(k, a + r * lda, lda, base + j, offsets, c + r * ldc + j, ldc); break;
      default: break;
    }
  }
}

void multiply_transposed(std::size_t m, std::size_t n, std::size_t k, const float* a, std::size_t lda,
                         const float* base, const std::int32_t* offsets, float* c, std::size_t ldc) {
  if (!available()) throw error::InternalError("offset_gemm::multiply_transposed needs AVX2 and FMA");
  if (n % kReductionStep != 0)
    throw error::InternalError("offset_gemm::multiply_transposed: n = " + std::to_string(n) + " is not a multiple of " +
                               std::to_string(kReductionStep));
  std::size_t r = 0;
  for (; r + 4 <= m; r += 4) transposed_rows<4>(n, k, a + r * lda, lda, base, offsets, c + r * ldc, ldc);
  switch (m - r) {
    case 3: transposed_rows<3>(n, k, a + r * lda, lda, base, offsets, c + r * ldc, ldc); break;
    case 2: transposed_rows<2>(n, k, a + r * lda, lda, base, offsets, c + r * ldc, ldc); break;
    case 1: transposed_rows<1>(n, k, a + r * lda, lda, base, offsets, c + r * ldc, ldc); break;
    default: break;
  }
}

}  // namespace meridian::models::offset_gemm
