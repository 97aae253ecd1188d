#include "cuda/blas_handle.h"

#include <utility>

#include "cuda/cublas_library.h"
#include "cuda/error.h"

namespace meridian::cuda {

BlasHandle::BlasHandle(cudaStream_t stream) {
  const CublasLibrary& lib = cublas();
  MERIDIAN_CUBLAS_CHECK(lib.cublasCreate_v2(&handle_));
  try {
    MERIDIAN_CUBLAS_CHECK(lib.cublasSetStream_v2(handle_, stream));
    // Said explicitly because parity with the CPU reference depends on it: full fp32 GEMMs, no TF32
    // tensor-core rounding (that is an opt-in mode, CUBLAS_TF32_TENSOR_OP_MATH).
    MERIDIAN_CUBLAS_CHECK(lib.cublasSetMathMode(handle_, CUBLAS_DEFAULT_MATH));
  } catch (...) {
    reset();
    throw;
  }
}

BlasHandle::~BlasHandle() { reset(); }

BlasHandle::BlasHandle(BlasHandle&& other) noexcept : handle_(std::exchange(other.handle_, nullptr)) {}

BlasHandle& BlasHandle::operator=(BlasHandle&& other) noexcept {
  if (this != &other) {
    reset();
    handle_ = std::exchange(other.handle_, nullptr);
  }
  return *this;
}

void BlasHandle::reset() noexcept {
  // A handle exists only once cublas() has loaded the library.
  if (handle_ != nullptr) (void)cublas().cublasDestroy_v2(handle_);
  handle_ = nullptr;
}

}  // namespace meridian::cuda
