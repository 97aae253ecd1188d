#include "cuda/gemm.h"

#include <stdexcept>
#include <string>

#include "cuda/cublas_library.h"
#include "cuda/error.h"
#include "error/error.h"

namespace meridian::cuda {

namespace {

void expect_stride(const char* name, int stride, int row_length) {
  if (stride < row_length || stride < 1) {
    throw error::InternalError(std::string("gemm: ") + name + " = " + std::to_string(stride) +
                               " is smaller than a row of " + std::to_string(row_length) + " elements");
  }
}

}  // namespace

void gemm(cublasHandle_t handle, Transpose trans_a, Transpose trans_b, int m, int n, int k, float alpha, const float* a,
          int lda, const float* b, int ldb, float beta, float* c, int ldc) {
  if (m < 0 || n < 0 || k < 0) {
    throw error::InternalError("gemm: negative size m=" + std::to_string(m) + " n=" + std::to_string(n) +
                               " k=" + std::to_string(k));
  }
  const bool ta = trans_a == Transpose::kYes;
  const bool tb = trans_b == Transpose::kYes;
  expect_stride("lda", lda, ta ? m : k);
  expect_stride("ldb", ldb, tb ? k : n);
  expect_stride("ldc", ldc, n);
  if (m == 0 || n == 0) return;
  // Row-major C (m×n) is column-major Cᵀ (n×m): Cᵀ = op(B)ᵀ op(A)ᵀ, so B goes first with n rows, and the
  // transpose flags keep their meaning because a row-major stride is the column-major leading dimension.
  MERIDIAN_CUBLAS_CHECK(cublas().cublasSgemm_v2(handle, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N,
                                                n, m, k, &alpha, b, ldb, a, lda, &beta, c, ldc));
}

}  // namespace meridian::cuda
