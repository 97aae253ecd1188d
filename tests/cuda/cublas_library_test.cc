// cuBLAS is opened on the first handle (cuda/cublas_library.h), not when the binary starts: a process that
// never multiplies on a GPU (every CLI command, every site on a machine without one) does not pay for
// loading it. These run without a GPU: loading the library and naming its statuses need no device.
#include <catch2/catch.hpp>

#include <string>

#include "cuda/cublas_library.h"
#include "tests/support/meridian_command.h"

using meridian::cuda::cublas;
using meridian::cuda::CublasLibrary;

TEST_CASE("the meridian binary starts without loading cuBLAS", "[cuda][cublas][process]") {
  // The dynamic loader's trace names every library it opens.
  const auto run = meridian::tests::run_meridian("--version", "LD_DEBUG=libs");
  REQUIRE(run.exit_code == 0);
  CHECK_THAT(run.output, Catch::Contains("libcudart.so"));  // linked: the trace works
  CHECK_THAT(run.output, !Catch::Contains("libcublas"));
}

TEST_CASE("cuBLAS loads on first use with every function the backend calls", "[cuda][cublas][unit]") {
  const CublasLibrary& lib = cublas();
  CHECK(lib.cublasCreate_v2 != nullptr);
  CHECK(lib.cublasDestroy_v2 != nullptr);
  CHECK(lib.cublasSetStream_v2 != nullptr);
  CHECK(lib.cublasSetMathMode != nullptr);
  CHECK(lib.cublasSgemm_v2 != nullptr);
  REQUIRE(lib.cublasGetStatusString != nullptr);
  // A real call into the loaded library.
  CHECK_THAT(std::string(lib.cublasGetStatusString(CUBLAS_STATUS_INVALID_VALUE)), Catch::Contains("unsupported value"));
  CHECK(&cublas() == &lib);  // loaded once
}
