// Checked calls into the CUDA runtime, cuBLAS and cuDNN.
//
// Every call goes through one of the macros below; a failure throws meridian::cuda::Error whose message
// names the call, the source file and line, the library's error name and its explanation, e.g.
//   cuda/stream.cc:21: cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking) failed:
//   cudaErrorInsufficientDriver (CUDA driver version is insufficient for CUDA runtime version)
// Error is recoverable the way an I/O error is: the caller can fall back to the CPU backend. A device that
// has hit a sticky error (an illegal address in a kernel) stays unusable for the rest of the process; the
// runtime reports that on every later call, so it surfaces as an Error too.
//
// Thread safety: the functions are stateless; cudaGetLastError (used by MERIDIAN_CUDA_CHECK_LAUNCH) reads
// and clears the calling thread's last error only.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <stdexcept>
#include <string>

#include "error/error.h"

namespace meridian::cuda {

// The library whose call failed.
enum class Library { kRuntime, kCublas, kCudnn };

// The internal tier of Meridian's errors (error/error.h): the platform under the code failed.
class Error : public error::InternalError {
 public:
  // `code` is the library's status value, `code_name` its symbolic name (cudaErrorNoDevice, ...).
  Error(Library library, int code, std::string code_name, const std::string& what);

  Library library() const noexcept { return library_; }
  int code() const noexcept { return code_; }
  const std::string& code_name() const noexcept { return code_name_; }

 private:
  Library library_;
  int code_;
  std::string code_name_;
};

// Throw Error when the status is not success; `call` is the source text of the call.
[[noreturn]] void throw_runtime_error(cudaError_t status, const char* call, const char* file, int line);
[[noreturn]] void throw_cublas_error(cublasStatus_t status, const char* call, const char* file, int line);
[[noreturn]] void throw_cudnn_error(cudnnStatus_t status, const char* call, const char* file, int line);

inline void check_runtime(cudaError_t status, const char* call, const char* file, int line) {
  if (status != cudaSuccess) throw_runtime_error(status, call, file, line);
}
inline void check_cublas(cublasStatus_t status, const char* call, const char* file, int line) {
  if (status != CUBLAS_STATUS_SUCCESS) throw_cublas_error(status, call, file, line);
}
inline void check_cudnn(cudnnStatus_t status, const char* call, const char* file, int line) {
  if (status != CUDNN_STATUS_SUCCESS) throw_cudnn_error(status, call, file, line);
}

// The symbolic name of a cuBLAS status (cuBLAS only offers the explanation, not the name).
const char* cublas_status_name(cublasStatus_t status) noexcept;

}  // namespace meridian::cuda

#define MERIDIAN_CUDA_CHECK(call) ::meridian::cuda::check_runtime((call), #call, __FILE__, __LINE__)
#define MERIDIAN_CUBLAS_CHECK(call) ::meridian::cuda::check_cublas((call), #call, __FILE__, __LINE__)
#define MERIDIAN_CUDNN_CHECK(call) ::meridian::cuda::check_cudnn((call), #call, __FILE__, __LINE__)
// After a kernel launch: a bad launch configuration is reported by cudaGetLastError, not by the launch.
#define MERIDIAN_CUDA_CHECK_LAUNCH() \
  ::meridian::cuda::check_runtime(cudaGetLastError(), "kernel launch", __FILE__, __LINE__)
