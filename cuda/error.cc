#include "cuda/error.h"

#include <utility>

#include "cuda/cublas_library.h"

namespace meridian::cuda {

namespace {

std::string describe(const char* file, int line, const char* call, const char* name, const char* text) {
  std::string what = std::string(file) + ":" + std::to_string(line) + ": " + call + " failed: " + name;
  if (text != nullptr && *text != '\0') what += std::string(" (") + text + ")";
  return what;
}

}  // namespace

Error::Error(Library library, int code, std::string code_name, const std::string& what)
    : error::InternalError(Located{}, what), library_(library), code_(code), code_name_(std::move(code_name)) {}

void throw_runtime_error(cudaError_t status, const char* call, const char* file, int line) {
  const char* name = cudaGetErrorName(status);
  throw Error(Library::kRuntime, static_cast<int>(status), name,
              describe(file, line, call, name, cudaGetErrorString(status)));
}

void throw_cublas_error(cublasStatus_t status, const char* call, const char* file, int line) {
  const char* name = cublas_status_name(status);
  // cuBLAS explains its statuses itself; without the library (it failed to load) the name has to do.
  const char* text = nullptr;
  try {
    text = cublas().cublasGetStatusString(status);
  } catch (const Error&) {
  }
  throw Error(Library::kCublas, static_cast<int>(status), name, describe(file, line, call, name, text));
}

void throw_cudnn_error(cudnnStatus_t status, const char* call, const char* file, int line) {
  // cudnnGetErrorString returns the symbolic name; the detail of the last failure (which descriptor was
  // wrong) is only available from cudnnGetLastErrorString, and only for the calling thread.
  const char* name = cudnnGetErrorString(status);
  char detail[512] = {0};
  cudnnGetLastErrorString(detail, sizeof detail);
  throw Error(Library::kCudnn, static_cast<int>(status), name, describe(file, line, call, name, detail));
}

const char* cublas_status_name(cublasStatus_t status) noexcept {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR: return "CUBLAS_STATUS_LICENSE_ERROR";
  }
  return "CUBLAS_STATUS_UNKNOWN";
}

}  // namespace meridian::cuda
