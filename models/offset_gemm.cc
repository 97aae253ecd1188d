#include "models/offset_gemm.h"

#include <immintrin.h>

#include <algorithm>

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

// c[r][0..8·V) for R rows: V × R accumulators stay in registers for the whole k loop; each step loads
// one 8·V-wide window of B and broadcasts R values of a.
template <int R, int V>
MERIDIAN_AVX2 void multiply_block(std::size_t k, const float* a, std::size_t lda, const float* base,
                                  const std::int32_t* offsets, float* c, std::size_t ldc) {
  __m256 acc[R][V];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 3
    for (int v = 0; v < V; ++v) acc[r][v] = _mm256_setzero_ps();
  for (std::size_t kk = 0; kk < k; ++kk) {
    const float* b = base + offsets[kk];
    __m256 bv[V];
#pragma GCC unroll 3
    for (int v = 0; v < V; ++v) bv[v] = _mm256_loadu_ps(b + 8 * v);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const __m256 av = _mm256_broadcast_ss(a + r * lda + kk);
#pragma GCC unroll 3
      for (int v = 0; v < V; ++v) acc[r][v] = _mm256_fmadd_ps(av, bv[v], acc[r][v]);
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 3
    for (int v = 0; v < V; ++v) _mm256_storeu_ps(c + r * ldc + 8 * v, acc[r][v]);
}

// All m rows of one column block of 8·V columns, four rows at a time.
template <int V>
void multiply_columns(std::size_t m, std::size_t k, const float* a, std::size_t lda, const float* base,
                      const std::int32_t* offsets, float* c, std::size_t ldc) {
  std::size_t r = 0;
  for (; r + 4 <= m; r += 4) multiply_block<4, V>(k, a + r * lda, lda, base, offsets, c + r * ldc, ldc);
  switch (m - r) {
    case 3: multiply_block<3, V>(k, a + r * lda, lda, base, offsets, c + r * ldc, ldc); break;
    case 2: multiply_block<2, V>(k, a + r * lda, lda, base, offsets, c + r * ldc, ldc); break;
    case 1: multiply_block<1, V>(k, a + r * lda, lda, base, offsets, c + r * ldc, ldc); break;
    default: break;
  }
}

MERIDIAN_AVX2 inline float horizontal_sum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// c[r][s] += Σ_i Σ_j a_i[r][j] · B_i[s][j] for R rows of a and S rows of B over the stacked pairs i:
// R × S vector sums over the whole reduction, added up across their lanes once at the end.
template <int R, int S>
MERIDIAN_AVX2 void transposed_block(const Stack& stack, std::size_t n, const float* a, std::size_t lda,
                                    const float* base, const std::int32_t* offsets, float* c, std::size_t ldc) {
  __m256 acc[R][S];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int s = 0; s < S; ++s) acc[r][s] = _mm256_setzero_ps();
  for (std::size_t i = 0; i < stack.count; ++i) {
    const float* ai = a + i * stack.a_step;
    const float* b[S];
#pragma GCC unroll 4
    for (int s = 0; s < S; ++s) b[s] = base + i * stack.base_step + offsets[s];
    for (std::size_t j = 0; j < n; j += kReductionStep) {
      __m256 bv[S];
#pragma GCC unroll 4
      for (int s = 0; s < S; ++s) bv[s] = _mm256_loadu_ps(b[s] + j);
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        const __m256 av = _mm256_loadu_ps(ai + r * lda + j);
#pragma GCC unroll 4
        for (int s = 0; s < S; ++s) acc[r][s] = _mm256_fmadd_ps(av, bv[s], acc[r][s]);
      }
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int s = 0; s < S; ++s) c[r * ldc + s] += horizontal_sum(acc[r][s]);
}

template <int R>
void transposed_rows(const Stack& stack, std::size_t n, std::size_t k, const float* a, std::size_t lda,
                     const float* base, const std::int32_t* offsets, float* c, std::size_t ldc) {
  std::size_t kk = 0;
  for (; kk + 3 <= k; kk += 3) transposed_block<R, 3>(stack, n, a, lda, base, offsets + kk, c + kk, ldc);
  if (k - kk == 2) transposed_block<R, 2>(stack, n, a, lda, base, offsets + kk, c + kk, ldc);
  if (k - kk == 1) transposed_block<R, 1>(stack, n, a, lda, base, offsets + kk, c + kk, ldc);
}

}  // namespace

void multiply(std::size_t m, std::size_t n, std::size_t k, const float* a, std::size_t lda, const float* base,
              const std::int32_t* offsets, float* c, std::size_t ldc) {
  if (!available()) throw error::InternalError("offset_gemm::multiply needs AVX2 and FMA");
  // Column blocks outside, row blocks inside: the windows of B that a column block reads stay in L1 while
  // every row block of a passes over them. The last block is only as wide as the columns left (in whole
  // vectors), which matters for small images: 7×7 makes 61 positions, 64 computed rather than 72.
  for (std::size_t j = 0; j < n; j += kColumnBlock) {
    const std::size_t vectors = std::min<std::size_t>(3, (n - j + 7) / 8);
    if (vectors == 3) multiply_columns<3>(m, k, a, lda, base + j, offsets, c + j, ldc);
    if (vectors == 2) multiply_columns<2>(m, k, a, lda, base + j, offsets, c + j, ldc);
    if (vectors == 1) multiply_columns<1>(m, k, a, lda, base + j, offsets, c + j, ldc);
  }
}

void multiply_transposed(const Stack& stack, std::size_t m, std::size_t n, std::size_t k, const float* a,
                         std::size_t lda, const float* base, const std::int32_t* offsets, float* c, std::size_t ldc) {
  if (!available()) throw error::InternalError("offset_gemm::multiply_transposed needs AVX2 and FMA");
  if (n % kReductionStep != 0)
    throw error::InternalError("offset_gemm::multiply_transposed: n = " + std::to_string(n) + " is not a multiple of " +
                               std::to_string(kReductionStep));
  std::size_t r = 0;
  for (; r + 4 <= m; r += 4) transposed_rows<4>(stack, n, k, a + r * lda, lda, base, offsets, c + r * ldc, ldc);
  switch (m - r) {
    case 3: transposed_rows<3>(stack, n, k, a + r * lda, lda, base, offsets, c + r * ldc, ldc); break;
    case 2: transposed_rows<2>(stack, n, k, a + r * lda, lda, base, offsets, c + r * ldc, ldc); break;
    case 1: transposed_rows<1>(stack, n, k, a + r * lda, lda, base, offsets, c + r * ldc, ldc); break;
    default: break;
  }
}

}  // namespace meridian::models::offset_gemm
