// The RAII owners (streams, events, handles, device and pinned buffers, the parameter snapshot): on a
// machine without a usable device each constructor fails with cuda::Error naming the call instead of
// crashing; with a device they work and move correctly.
#include <catch2/catch.hpp>

#include <numeric>
#include <string>
#include <vector>

#include "cuda/blas_handle.h"
#include "cuda/device_buffer.h"
#include "cuda/dnn_handle.h"
#include "cuda/error.h"
#include "cuda/event.h"
#include "cuda/parameter_snapshot.h"
#include "cuda/pinned_buffer.h"
#include "cuda/stream.h"
#include "error/error.h"
#include "models/device.h"

using namespace meridian::cuda;

namespace {

template <typename Make>
std::string error_of(Make make) {
  try {
    make();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("without a device every owner fails with cuda::Error naming where", "[cuda][owners][unit]") {
  const auto cuda = meridian::models::probe_cuda();
  if (cuda.device_count > 0) {
    WARN("SKIPPED: this machine has a CUDA device; the no-device failure paths cannot be reached");
    return;
  }
  CHECK_THAT(error_of([] { Stream s; }), Catch::Contains("cuda/stream.cc:") && Catch::Contains("cudaStreamCreate"));
  CHECK_THAT(error_of([] { Event e; }), Catch::Contains("cuda/event.cc:") && Catch::Contains("cudaEventCreate"));
  CHECK_THAT(error_of([] { DeviceBuffer<float> b(16); }), Catch::Contains("cudaMalloc"));
  CHECK_THAT(error_of([] { PinnedBuffer<float> b(16); }), Catch::Contains("cudaMallocHost"));
  CHECK_THAT(error_of([] { BlasHandle h(nullptr); }),
             Catch::Contains("cuda/blas_handle.cc:") && Catch::Contains("cublasCreate"));
  CHECK_THAT(error_of([] { DnnHandle h(nullptr); }),
             Catch::Contains("cuda/dnn_handle.cc:") && Catch::Contains("cudnnCreate"));
  CHECK_THAT(error_of([] { ParameterSnapshot s(16); }), Catch::Contains("cudaMallocHost"));
  // Empty buffers allocate nothing, so they exist even without a device.
  DeviceBuffer<float> empty(0);
  CHECK(empty.size() == 0);
  CHECK(empty.data() == nullptr);
}

TEST_CASE("device buffers round-trip through pinned memory and move without double frees", "[cuda][owners][unit]") {
  const auto cuda = meridian::models::probe_cuda();
  if (cuda.device_count == 0) {
    WARN("SKIPPED: no CUDA device: " << cuda.reason);
    return;
  }
  Stream stream;
  PinnedBuffer<float> host(1000);
  std::iota(host.span().begin(), host.span().end(), 1.0f);
  DeviceBuffer<float> device(1000);
  device.copy_from_host(host.span(), stream.get());
  DeviceBuffer<float> moved = std::move(device);
  CHECK(device.data() == nullptr);
  CHECK(moved.size() == 1000);
  std::vector<float> back(1000, 0.0f);
  moved.copy_to_host(back, stream.get());
  stream.synchronize();
  CHECK(back == std::vector<float>(host.span().begin(), host.span().end()));
  CHECK_THROWS_AS(moved.copy_to_host(std::span<float>(back.data(), 999), stream.get()), meridian::error::InternalError);

  Event done;
  moved.zero(stream.get());
  done.record(stream.get());
  done.synchronize();
  CHECK(done.done());
  moved.copy_to_host(back, stream.get());
  stream.synchronize();
  CHECK(back == std::vector<float>(1000, 0.0f));

  BlasHandle blas(stream.get());
  DnnHandle dnn(stream.get());
  BlasHandle blas_moved = std::move(blas);
  CHECK(blas.get() == nullptr);
  CHECK(blas_moved.get() != nullptr);
  CHECK(dnn.get() != nullptr);
}
