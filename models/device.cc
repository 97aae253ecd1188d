#include "models/device.h"

#include <charconv>

#if MERIDIAN_HAVE_CUDA
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#endif

namespace meridian::models {

namespace {

std::string accepted(std::string_view text) {
  return "invalid --device '" + std::string(text) + "': expected auto, cpu, cuda or cuda:N (N = 0, 1, ...)";
}

#if MERIDIAN_HAVE_CUDA
// Whether the NVIDIA driver's library can be loaded at all (the runtime loads the same name).
bool driver_library_present() {
  void* library = ::dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
  if (library == nullptr) return false;
  ::dlclose(library);
  return true;
}
#endif

}  // namespace

// Appended to the "no CUDA device" error: what to do instead.
constexpr const char* kNoDeviceHint =
    "\nhint: use --device cpu to train on the CPU, or --device auto to use a GPU only where there is one; "
    "`meridian devices` shows what this machine offers";

std::string Device::name() const { return is_cuda() ? "cuda:" + std::to_string(index) : "cpu"; }

DeviceRequest parse_device(std::string_view text) {
  if (text == "auto") return {DeviceRequest::Kind::kAuto, -1};
  if (text == "cpu") return {DeviceRequest::Kind::kCpu, -1};
  if (text == "cuda") return {DeviceRequest::Kind::kCuda, -1};
  constexpr std::string_view prefix = "cuda:";
  if (!text.starts_with(prefix)) throw DeviceError(accepted(text));
  const std::string_view digits = text.substr(prefix.size());
  // from_chars would accept "-1" and leave "1x" partly parsed: insist on digits only, and a bound that
  // no machine reaches, so that an overflow is reported as what it is.
  if (digits.empty() || digits.size() > 4 || digits.find_first_not_of("0123456789") != std::string_view::npos) {
    throw DeviceError(accepted(text));
  }
  int index = 0;
  std::from_chars(digits.data(), digits.data() + digits.size(), index);
  return {DeviceRequest::Kind::kCuda, index};
}

DeviceSelection resolve_device(const DeviceRequest& request, const CudaAvailability& cuda) {
  switch (request.kind) {
    case DeviceRequest::Kind::kCpu: return {{DeviceKind::kCpu, 0}, "cpu: requested"};
    case DeviceRequest::Kind::kAuto:
      if (cuda.device_count > 0) {
        return {{DeviceKind::kCuda, 0},
                "auto: " + std::to_string(cuda.device_count) + " CUDA device(s) found; training on cuda:0"};
      }
      return {{DeviceKind::kCpu, 0}, "auto: no CUDA device: " + cuda.reason + "; training on the CPU"};
    case DeviceRequest::Kind::kCuda: break;
  }
  const int index = request.index < 0 ? 0 : request.index;
  const std::string asked = request.index < 0 ? "cuda" : "cuda:" + std::to_string(index);
  if (cuda.device_count <= 0)
    throw DeviceError("--device " + asked + ": no CUDA device: " + cuda.reason + kNoDeviceHint);
  if (index >= cuda.device_count) {
    throw DeviceError("--device " + asked + ": this machine has only " + std::to_string(cuda.device_count) +
                      " CUDA device(s) (cuda:0 to cuda:" + std::to_string(cuda.device_count - 1) + ")");
  }
  return {{DeviceKind::kCuda, index}, asked + ": requested"};
}

CudaAvailability probe_cuda() {
#if MERIDIAN_HAVE_CUDA
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status == cudaSuccess && count > 0) return {count, ""};
  if (status == cudaSuccess) return {0, "the CUDA runtime reports 0 devices"};
  // The runtime says "insufficient driver" both when the driver is too old and when there is none at all.
  // No driver library is the common case, a machine without a GPU, and deserves a plain sentence rather
  // than the runtime's alarming one.
  if (status == cudaErrorInsufficientDriver && !driver_library_present())
    return {0, "no NVIDIA driver (no libcuda.so.1)"};
  std::string reason = std::string(cudaGetErrorString(status)) + " (" + cudaGetErrorName(status);
  if (status == cudaErrorInsufficientDriver) reason += ": the NVIDIA driver is older than CUDA 13 needs";
  return {0, reason + ")"};
#else
  return {0, "this build has no CUDA backend (nvcc was not found at build time, or it was built with CUDA=0)"};
#endif
}

DeviceSelection select_device(std::string_view text) { return resolve_device(parse_device(text), probe_cuda()); }

}  // namespace meridian::models
