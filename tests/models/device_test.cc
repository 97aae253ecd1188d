// --device parsing and resolution (pure, every build), the real probe of this machine, and the
// `meridian devices` command run as a real process. These run in the CPU build too.
#include <catch2/catch.hpp>

#include <dlfcn.h>

#include <filesystem>
#include <string>

#include "error/exit_code.h"
#include "models/device.h"
#include "tests/support/meridian_command.h"

using namespace meridian::models;
using meridian::tests::run_meridian;

namespace {

const CudaAvailability kNoGpu{0, "CUDA driver version is insufficient (test)"};
const CudaAvailability kTwoGpus{2, ""};

}  // namespace

TEST_CASE("parse_device accepts auto, cpu, cuda and cuda:N", "[models][device][unit]") {
  CHECK(parse_device("auto") == DeviceRequest{DeviceRequest::Kind::kAuto, -1});
  CHECK(parse_device("cpu") == DeviceRequest{DeviceRequest::Kind::kCpu, -1});
  CHECK(parse_device("cuda") == DeviceRequest{DeviceRequest::Kind::kCuda, -1});
  CHECK(parse_device("cuda:0") == DeviceRequest{DeviceRequest::Kind::kCuda, 0});
  CHECK(parse_device("cuda:12") == DeviceRequest{DeviceRequest::Kind::kCuda, 12});
}

TEST_CASE("parse_device rejects anything else, naming the value and the accepted spellings", "[models][device][unit]") {
  for (const char* bad : {"", "gpu", "CUDA", " cpu", "cuda:", "cuda:-1", "cuda:1x", "cuda:+1", "cuda:99999", "cuda0"}) {
    INFO("value: '" << bad << "'");
    try {
      parse_device(bad);
      FAIL("accepted");
    } catch (const DeviceError& e) {
      const std::string what = e.what();
      CHECK(what.find(std::string("'") + bad + "'") != std::string::npos);
      CHECK(what.find("expected auto, cpu, cuda or cuda:N") != std::string::npos);
    }
  }
}

TEST_CASE("auto picks cuda:0 when a device exists and the CPU with the reason otherwise", "[models][device][unit]") {
  const DeviceSelection with_gpu = resolve_device(parse_device("auto"), kTwoGpus);
  CHECK(with_gpu.device == Device{DeviceKind::kCuda, 0});
  CHECK(with_gpu.device.name() == "cuda:0");

  const DeviceSelection without = resolve_device(parse_device("auto"), kNoGpu);
  CHECK(without.device == Device{DeviceKind::kCpu, 0});
  CHECK(without.device.name() == "cpu");
  CHECK(without.explanation.find("no CUDA device: " + kNoGpu.reason) != std::string::npos);

  CHECK(resolve_device(parse_device("cpu"), kTwoGpus).device == Device{DeviceKind::kCpu, 0});
}

TEST_CASE("cuda[:N] selects that device or fails with the reason", "[models][device][unit]") {
  CHECK(resolve_device(parse_device("cuda"), kTwoGpus).device == Device{DeviceKind::kCuda, 0});
  CHECK(resolve_device(parse_device("cuda:1"), kTwoGpus).device == Device{DeviceKind::kCuda, 1});
  using Catch::Matchers::Contains;
  using Catch::Matchers::StartsWith;
  CHECK_THROWS_WITH(resolve_device(parse_device("cuda"), kNoGpu),
                    StartsWith("--device cuda: no CUDA device: " + kNoGpu.reason + "\nhint: use --device cpu"));
  CHECK_THROWS_WITH(resolve_device(parse_device("cuda:0"), kNoGpu),
                    StartsWith("--device cuda:0: no CUDA device: " + kNoGpu.reason) && Contains("--device auto"));
  CHECK_THROWS_WITH(resolve_device(parse_device("cuda:2"), kTwoGpus),
                    "--device cuda:2: this machine has only 2 CUDA device(s) (cuda:0 to cuda:1)");
}

TEST_CASE("probing this machine never throws and explains an absent device", "[models][device][unit]") {
  const CudaAvailability cuda = probe_cuda();
  INFO("devices: " << cuda.device_count << ", reason: " << cuda.reason);
  // Either devices or a reason, never both or neither.
  CHECK(cuda.device_count >= 0);
  CHECK((cuda.device_count == 0) == !cuda.reason.empty());
#if MERIDIAN_HAVE_CUDA
  // No driver library at all is said plainly (and only then); otherwise the runtime's own words: a
  // device count of 0, or an error named after its enum.
  if (cuda.device_count == 0) {
    const bool driver_present = std::filesystem::exists("/dev/nvidiactl") || [] {
      void* library = ::dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
      if (library != nullptr) ::dlclose(library);
      return library != nullptr;
    }();
    if (!driver_present) CHECK(cuda.reason == "no NVIDIA driver (no libcuda.so.1)");
    else
      CHECK(
          (cuda.reason == "the CUDA runtime reports 0 devices" || cuda.reason.find("(cudaError") != std::string::npos));
  }
#else
  CHECK(cuda.device_count == 0);
  CHECK(cuda.reason.starts_with("this build has no CUDA backend"));
#endif
  // The runtime sees a device only through the NVIDIA driver, whose control node every device needs.
  if (cuda.device_count > 0) CHECK(std::filesystem::exists("/dev/nvidiactl"));

  // The same machine probed again gives the same answer.
  const CudaAvailability again = probe_cuda();
  CHECK(again.device_count == cuda.device_count);
  CHECK(again.reason == cuda.reason);

  // auto follows the probe and says why.
  const DeviceSelection selection = select_device("auto");
  CHECK(selection.device.is_cuda() == (cuda.device_count > 0));
  if (cuda.device_count > 0) {
    CHECK(selection.explanation ==
          "auto: " + std::to_string(cuda.device_count) + " CUDA device(s) found; training on cuda:0");
  } else {
    CHECK(selection.explanation == "auto: no CUDA device: " + cuda.reason + "; training on the CPU");
  }
}

TEST_CASE("meridian devices --device cuda fails cleanly with the reason where there is no GPU",
          "[models][device][process]") {
  const CudaAvailability cuda = probe_cuda();
  const auto result = run_meridian("devices --device cuda");
  if (cuda.device_count == 0) {
    CHECK(result.exit_code == meridian::error::kExitUser);
    CHECK(result.output.find("meridian: error: --device cuda: no CUDA device: " + cuda.reason) != std::string::npos);
  } else {
    CHECK(result.exit_code == 0);
    CHECK(result.output.find("--device cuda selects cuda:0") != std::string::npos);
  }
}

TEST_CASE("meridian devices reports what auto selects and rejects a misspelt device", "[models][device][process]") {
  const CudaAvailability cuda = probe_cuda();
  const auto automatic = run_meridian("devices");
  CHECK(automatic.exit_code == 0);
  CHECK(automatic.output.find(cuda.device_count > 0 ? "--device auto selects cuda:0" : "--device auto selects cpu") !=
        std::string::npos);

  const auto typo = run_meridian("devices --device gpu");
  CHECK(typo.exit_code == meridian::error::kExitUser);
  CHECK(typo.output.find("invalid --device 'gpu'") != std::string::npos);
}

TEST_CASE("meridian train --device cuda fails cleanly, with a hint, where there is no GPU",
          "[models][device][process]") {
  const CudaAvailability cuda = probe_cuda();
  if (cuda.device_count > 0) {
    WARN("SKIPPED: this machine has a CUDA device, so --device cuda does not fail here");
    return;
  }
  const auto result = run_meridian("train --device cuda --epochs 1");
  CHECK(result.exit_code == meridian::error::kExitUser);
  CHECK(result.output.find("meridian: error: --device cuda: no CUDA device: " + cuda.reason) != std::string::npos);
  CHECK(result.output.find("hint: use --device cpu") != std::string::npos);
  CHECK(result.output.find("epoch") == std::string::npos);  // refused before any training

  const auto indexed = run_meridian("train --device cuda:1 --epochs 1");
  CHECK(indexed.exit_code == meridian::error::kExitUser);
  CHECK(indexed.output.find("--device cuda:1: no CUDA device") != std::string::npos);
}
