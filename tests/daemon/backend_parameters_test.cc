// The daemon's ParameterStore over a model's backend memory (daemon/backend/backend_parameters.h), which dsync
// uses on the GPU, run here on the CPU backend against the host-span store every mixer used before: the
// snapshot, the assignment and the delayed compensation (plain and damped) must give the same bits, since
// the backend route is the same element-wise math in another order of exact operations.
#include <catch2/catch.hpp>

#include <memory>
#include <vector>

#include "daemon/backend/backend_parameters.h"
#include "gossip/parameter_store.h"
#include "models/cpu_backend.h"
#include "models/model_factory.h"

using meridian::daemon::BackendParameters;
using meridian::gossip::HostParameters;

TEST_CASE("backend parameters read, assign and compensate exactly as host parameters",
          "[daemon][mixing][memory][unit]") {
  auto model = meridian::models::make_mlp({6, 1, 1}, {5}, 3, std::make_shared<meridian::models::CpuBackend>(1), 3);
  const std::size_t n = model->parameter_count();
  std::vector<float> host(n);
  model->read_parameters(host);
  BackendParameters on_backend(model->backend(), model->parameters());
  HostParameters on_host(host);
  REQUIRE(on_backend.size() == n);

  std::vector<float> mixed(n), snapshot(n);
  for (std::size_t i = 0; i < n; ++i) {
    mixed[i] = 0.37f * static_cast<float>(i % 7) - 1.1f;
    snapshot[i] = 0.21f * static_cast<float>(i % 5) - 0.4f;
  }
  for (const float step : {1.0f, 0.5f, 1.0f / 3.0f}) {
    on_backend.compensate(mixed.data(), snapshot.data(), step);
    on_host.compensate(mixed.data(), snapshot.data(), step);
    std::vector<float> read(n);
    on_backend.read(read.data());
    INFO("step " << step);
    CHECK(read == host);
  }
  on_backend.assign(mixed.data());
  std::vector<float> read(n);
  on_backend.read(read.data());
  CHECK(read == mixed);
}
