// The asynchronous parameter snapshot: the host copy holds the parameters as they were when the snapshot
// started, even when the compute stream overwrites them right after (guard_writes orders the write behind
// the copy), and misuse is reported.
#include <catch2/catch.hpp>

#include <numeric>
#include <vector>

#include "cuda/device_buffer.h"
#include "cuda/parameter_snapshot.h"
#include "cuda/stream.h"
#include "error/error.h"
#include "tests/cuda/skip_without_device.h"

using namespace meridian::cuda;

TEST_CASE("a snapshot keeps the parameters of its step while compute overwrites them", "[cuda][snapshot][unit]") {
  MERIDIAN_SKIP_WITHOUT_CUDA_DEVICE();
  // Large enough (16 MiB) that the copy is still running when the memset is enqueued.
  const std::size_t n = 4u << 20;
  std::vector<float> params(n);
  std::iota(params.begin(), params.end(), 0.0f);
  Stream compute;
  DeviceBuffer<float> device(n);
  device.copy_from_host(params, compute.get());

  ParameterSnapshot snapshot(n);
  for (int step = 0; step < 3; ++step) {
    snapshot.start(device.data(), n, compute.get());
    CHECK_THROWS_AS(snapshot.start(device.data(), n, compute.get()), meridian::error::InternalError);
    snapshot.guard_writes(compute.get());
    device.zero(compute.get());  // the "optimizer update" that writes the parameters
    const std::span<const float> taken = snapshot.wait();
    CHECK(snapshot.ready());
    REQUIRE(taken.size() == n);
    CHECK(std::equal(taken.begin(), taken.end(), params.begin()));
    device.copy_from_host(params, compute.get());
  }
  compute.synchronize();
  CHECK_THROWS_AS(snapshot.start(device.data(), n - 1, compute.get()), meridian::error::InternalError);
}
