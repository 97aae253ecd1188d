// Matrix products whose right-hand matrix B is never stored: row kk of B is the window of one buffer
// that starts at offsets[kk], B[kk][j] = base[offsets[kk] + j]. A stride-1 convolution over a zero-padded
// image is such a product (models/implicit_gemm_convolution.h): each (channel, ky, kx) row of im2col's
// column matrix is the padded image shifted by channel·plane + ky·width + kx, so the product reads the
// image in place instead of a copy nine times its size.
//
// The kernels are hand-written for AVX2 + FMA (register blocks of 4 rows × 24 columns, and of 4 × 3 dot
// products), small-M shapes that OpenBLAS runs poorly once its packing is counted. Callers check
// available() first; without AVX2 and FMA nothing here may be called.
//
// Pointers are host memory. Thread safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>

namespace meridian::models::offset_gemm {

// Columns per register block of multiply(): c is written, and base read, at most up to whole blocks (the
// last block is cut to whole vectors of 8).
inline constexpr std::size_t kColumnBlock = 24;
// Elements per step of multiply_transposed(): the sums run over whole steps.
inline constexpr std::size_t kReductionStep = 8;

constexpr std::size_t round_up(std::size_t n, std::size_t block) { return (n + block - 1) / block * block; }

// True when this CPU runs AVX2 and FMA instructions.
bool available();

// c (m, n_padded) = a (m, k) · B (k, n_padded), with n_padded = round_up(n, kColumnBlock): row r of a
// starts at a + r·lda, row r of c at c + r·ldc (ldc >= n_padded), and B[kk][j] = base[offsets[kk] + j].
// May read base up to max(offsets) + n_padded and write c's columns [n, n_padded) (with values the caller
// ignores), so both buffers need that slack.
void multiply(std::size_t m, std::size_t n, std::size_t k, const float* a, std::size_t lda, const float* base,
              const std::int32_t* offsets, float* c, std::size_t ldc);

// Pairs (a_i, base_i) = (a + i·a_step, base + i·base_step) for i in [0, count): the images of a batch
// whose products multiply_transposed() adds up, so that each sum is reduced across its lanes once per
// stack rather than once per image.
struct Stack {
  std::size_t count = 1;
  std::size_t a_step = 0, base_step = 0;
};

// c (m, k) += Σ_i a_i (m, n) · B_iᵀ, i.e. c[r][kk] += Σ_i Σ_{j < n} a_i[r·lda + j] · base_i[offsets[kk] + j]
// over the pairs of `stack`, with n a multiple of kReductionStep (the caller pads a's rows with zeros,
// which also zero whatever base holds there). Row r of c starts at c + r·ldc.
void multiply_transposed(const Stack& stack, std::size_t m, std::size_t n, std::size_t k, const float* a,
                         std::size_t lda, const float* base, const std::int32_t* offsets, float* c, std::size_t ldc);

}  // namespace meridian::models::offset_gemm
