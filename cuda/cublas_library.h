// cuBLAS, opened with dlopen on first use instead of linked to the binary.
//
// Linking it costs every process that starts the binary, GPU or not: libcublas pulls in libcublasLt,
// whose load-time initialization took 358 ms of CPU and 25,700 page faults per start, against 4.5 ms for
// a program linked to the CUDA runtime alone (2026-11-27, 2-core AMD EPYC, CUDA 13). That was most of
// `meridian --version` and of every site's start on a machine without a GPU. Only the functions Meridian
// calls are resolved; their types come from the cuBLAS headers the backend is compiled against, and the
// library opened is the one with that major version (libcublas.so.<CUBLAS_VER_MAJOR>).
//
// Lookup: by soname first (the binary's run path, LD_LIBRARY_PATH, the loader's cache), then in the
// directory of the CUDA runtime the binary is linked to, where the toolkit installs cuBLAS too.
//
// Thread safety: the first call loads under std::call_once; the table is read-only afterwards. The library
// stays loaded until the process exits. Throws meridian::cuda::Error (Library::kCublas,
// CUBLAS_STATUS_NOT_INITIALIZED) naming what the loader said and how to fix it when the library or one of
// its functions is missing; every later call throws the same.
#pragma once

#include <cublas_v2.h>

namespace meridian::cuda {

// Each member is the function of that exported name, so a checked call reads as the cuBLAS call
// (and its error message names it): MERIDIAN_CUBLAS_CHECK(cublas().cublasSgemm_v2(...)).
struct CublasLibrary {
  decltype(&::cublasCreate_v2) cublasCreate_v2;
  decltype(&::cublasDestroy_v2) cublasDestroy_v2;
  decltype(&::cublasSetStream_v2) cublasSetStream_v2;
  decltype(&::cublasSetMathMode) cublasSetMathMode;
  decltype(&::cublasSgemm_v2) cublasSgemm_v2;
  decltype(&::cublasGetStatusString) cublasGetStatusString;
};

const CublasLibrary& cublas();

}  // namespace meridian::cuda
