// Row-major single-precision GEMM on cuBLAS, with the same meaning as
// cblas_sgemm(CblasRowMajor, ...) on the CPU backend:
//   C (m×n) = alpha · op(A) · op(B) + beta · C,  op(X) = X or Xᵀ,
// where A is m×k (k×m when transposed), B is k×n (n×k when transposed), and lda/ldb/ldc are row strides
// (elements between the starts of consecutive rows).
//
// cuBLAS is column-major; a row-major matrix read column-major is its transpose, so the call computes
// Cᵀ = op(B)ᵀ · op(A)ᵀ with the operands swapped, and nothing is copied or transposed in memory.
//
// All pointers are device memory; the work is enqueued on the handle's stream. Throws
// meridian::cuda::Error when cuBLAS rejects the call, error::InternalError for negative sizes or strides
// smaller than a row.
#pragma once

#include <cublas_v2.h>

namespace meridian::cuda {

enum class Transpose { kNo, kYes };

void gemm(cublasHandle_t handle, Transpose trans_a, Transpose trans_b, int m, int n, int k, float alpha, const float* a,
          int lda, const float* b, int ldb, float beta, float* c, int ldc);

}  // namespace meridian::cuda
