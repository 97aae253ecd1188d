// An owned cuBLAS handle bound to one stream.
//
// Ownership: cublasCreate in the constructor, cublasDestroy in the destructor (through cuda/cublas_library.h,
// which loads cuBLAS on the first handle); move-only. Thread safety: a
// handle belongs to one host thread (the trainer). Throws meridian::cuda::Error when cuBLAS cannot start
// (no device, no driver) or the stream cannot be set.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

namespace meridian::cuda {

class BlasHandle {
 public:
  // Every later call through this handle is enqueued on `stream` (nullptr: the legacy default stream).
  explicit BlasHandle(cudaStream_t stream);
  ~BlasHandle();
  BlasHandle(BlasHandle&& other) noexcept;
  BlasHandle& operator=(BlasHandle&& other) noexcept;
  BlasHandle(const BlasHandle&) = delete;
  BlasHandle& operator=(const BlasHandle&) = delete;

  cublasHandle_t get() const noexcept { return handle_; }

 private:
  void reset() noexcept;
  cublasHandle_t handle_ = nullptr;
};

}  // namespace meridian::cuda
