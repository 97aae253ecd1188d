// The daemon's background snapshot on a GPU (daemon/backend/async_parameter_copy.h through
// daemon/backend/backend_parameters.h): the CUDA backend gets a pinned copy on its own stream, and the snapshot
// holds the parameters as they were when it began even though the backend's stream overwrites them
// right after guard_writes(), as the next optimizer update does.
#include <catch2/catch.hpp>

#include <numeric>
#include <vector>

#include "cuda/cuda_backend.h"
#include "daemon/backend/async_parameter_copy.h"
#include "daemon/backend/backend_parameters.h"
#include "models/backend_buffer.h"
#include "tests/cuda/skip_without_device.h"

TEST_CASE("the daemon's snapshot on a GPU reads in the background and keeps its step's values",
          "[cuda][snapshot][daemon][unit]") {
  MERIDIAN_SKIP_WITHOUT_CUDA_DEVICE();
  meridian::cuda::CudaBackend backend(0);
  const std::size_t n = 1u << 20;  // 4 MiB: the copy is still running when the update is enqueued
  std::vector<float> start(n);
  std::iota(start.begin(), start.end(), 1.0f);
  meridian::models::BackendBuffer<float> x(backend, n);
  backend.copy_from_host(x.data(), start.data(), n * sizeof(float));
  meridian::daemon::BackendParameters store(backend, x.span(), meridian::daemon::make_async_parameter_copy(backend, n));
  REQUIRE(store.background_read());

  std::vector<float> taken(n), now(n), doubled(n);
  for (std::size_t i = 0; i < n; ++i) doubled[i] = 2.0f * start[i];
  for (int step = 0; step < 3; ++step) {
    store.begin_read();
    store.guard_writes();
    backend.push_sum_scale(n, x.data(), 2.0f);  // the "optimizer update" that writes the parameters
    store.end_read(taken.data());
    CHECK(taken == start);
    store.read(now.data());
    CHECK(now == doubled);
    backend.copy_from_host(x.data(), start.data(), n * sizeof(float));
  }
}
