#include "cuda/cublas_library.h"

#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <filesystem>
#include <mutex>
#include <optional>
#include <string>

#include "cuda/error.h"

namespace meridian::cuda {

namespace {

std::string soname() { return "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR); }

// The directory of the CUDA runtime library this binary is linked to, or empty when unknown.
std::filesystem::path runtime_directory() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<const void*>(&cudaRuntimeGetVersion), &info) == 0 || info.dli_fname == nullptr) return {};
  return std::filesystem::path(info.dli_fname).parent_path();
}

[[noreturn]] void fail(const std::string& what) {
  throw Error(Library::kCublas, static_cast<int>(CUBLAS_STATUS_NOT_INITIALIZED), "CUBLAS_STATUS_NOT_INITIALIZED",
              "cuBLAS could not be loaded: " + what + " (hint: install the CUDA toolkit's cuBLAS " +
                  std::to_string(CUBLAS_VER_MAJOR) + ", or add the directory holding " + soname() +
                  " to LD_LIBRARY_PATH; --device cpu needs none)");
}

void* open_library() {
  const std::string name = soname();
  // RTLD_LOCAL: nothing else in the process should bind to cuBLAS's symbols by accident.
  if (void* handle = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL)) return handle;
  std::string why = dlerror();
  const std::filesystem::path dir = runtime_directory();
  if (!dir.empty()) {
    const std::string beside = (dir / name).string();
    if (void* handle = dlopen(beside.c_str(), RTLD_NOW | RTLD_LOCAL)) return handle;
    why += "; " + std::string(dlerror());
  }
  fail(why);
}

template <typename F>
void resolve(void* handle, const char* symbol, F& out) {
  void* address = dlsym(handle, symbol);
  if (address == nullptr) fail(soname() + " has no " + symbol);
  out = reinterpret_cast<F>(address);
}

CublasLibrary load() {
  void* handle = open_library();
  CublasLibrary lib{};
  resolve(handle, "cublasCreate_v2", lib.cublasCreate_v2);
  resolve(handle, "cublasDestroy_v2", lib.cublasDestroy_v2);
  resolve(handle, "cublasSetStream_v2", lib.cublasSetStream_v2);
  resolve(handle, "cublasSetMathMode", lib.cublasSetMathMode);
  resolve(handle, "cublasSgemm_v2", lib.cublasSgemm_v2);
  resolve(handle, "cublasGetStatusString", lib.cublasGetStatusString);
  return lib;
}

}  // namespace

const CublasLibrary& cublas() {
  static std::once_flag once;
  static std::optional<CublasLibrary> library;
  static std::optional<Error> failure;
  std::call_once(once, [] {
    try {
      library = load();
    } catch (const Error& e) {
      failure = e;
    }
  });
  if (failure) throw *failure;
  return *library;
}

}  // namespace meridian::cuda
