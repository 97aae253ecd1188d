// The check macros turn every failing CUDA runtime, cuBLAS and cuDNN status into cuda::Error naming the
// call, file, line and error. These run without a GPU: the error names and texts come from the libraries.
#include <catch2/catch.hpp>

#include <string>

#include "cuda/error.h"

using meridian::cuda::Error;
using meridian::cuda::Library;

namespace {

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("a failing runtime call throws cuda::Error naming file, line, call and error", "[cuda][error][unit]") {
  int line = 0;
  try {
    line = __LINE__ + 1;
    MERIDIAN_CUDA_CHECK(cudaErrorMemoryAllocation);
    FAIL("no throw");
  } catch (const Error& e) {
    CHECK(e.library() == Library::kRuntime);
    CHECK(e.code() == static_cast<int>(cudaErrorMemoryAllocation));
    CHECK(e.code_name() == "cudaErrorMemoryAllocation");
    const std::string what = e.what();
    CHECK(contains(what, std::string(__FILE__) + ":" + std::to_string(line) + ": cudaErrorMemoryAllocation failed"));
    CHECK(contains(what, "(out of memory)"));
  }
  CHECK_NOTHROW(MERIDIAN_CUDA_CHECK(cudaSuccess));
}

TEST_CASE("a failing cuBLAS call throws cuda::Error with the status name and text", "[cuda][error][unit]") {
  try {
    MERIDIAN_CUBLAS_CHECK(CUBLAS_STATUS_INVALID_VALUE);
    FAIL("no throw");
  } catch (const Error& e) {
    CHECK(e.library() == Library::kCublas);
    CHECK(e.code_name() == "CUBLAS_STATUS_INVALID_VALUE");
    CHECK(contains(e.what(), "error_check_test.cc:"));
    CHECK(contains(e.what(), "CUBLAS_STATUS_INVALID_VALUE failed: CUBLAS_STATUS_INVALID_VALUE ("));
  }
  CHECK_NOTHROW(MERIDIAN_CUBLAS_CHECK(CUBLAS_STATUS_SUCCESS));
}

TEST_CASE("a failing cuDNN call throws cuda::Error with the status name", "[cuda][error][unit]") {
  try {
    MERIDIAN_CUDNN_CHECK(CUDNN_STATUS_BAD_PARAM);
    FAIL("no throw");
  } catch (const Error& e) {
    CHECK(e.library() == Library::kCudnn);
    CHECK(e.code_name() == "CUDNN_STATUS_BAD_PARAM");
    CHECK(contains(e.what(), "CUDNN_STATUS_BAD_PARAM failed: CUDNN_STATUS_BAD_PARAM"));
  }
  CHECK_NOTHROW(MERIDIAN_CUDNN_CHECK(CUDNN_STATUS_SUCCESS));
}
