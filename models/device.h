// Where a site trains: the `--device auto|cpu|cuda[:N]` choice.
//
// Parsing and resolution are pure functions, so the CPU build tests them; probe_cuda() asks the CUDA
// runtime how many devices there are when the binary was built with the CUDA backend
// (MERIDIAN_HAVE_CUDA), and says "this build has no CUDA backend" otherwise. Nothing here crashes or
// aborts on a machine without a GPU or driver: the absence of a device is a value, and only an explicit
// request for one that is not there is an error (DeviceError).
//
// Thread safety: all functions may be called from any thread.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

#include "error/error.h"

namespace meridian::models {

// A malformed --device value, or a request for a CUDA device that is not there.
class DeviceError : public error::UserError {
 public:
  using error::UserError::UserError;
};

enum class DeviceKind { kCpu, kCuda };

// A concrete device. `index` is the CUDA ordinal (0 for the CPU).
struct Device {
  DeviceKind kind = DeviceKind::kCpu;
  int index = 0;

  bool is_cuda() const noexcept { return kind == DeviceKind::kCuda; }
  // "cpu" or "cuda:N": the same spelling --device accepts.
  std::string name() const;
  friend bool operator==(const Device&, const Device&) = default;
};

// What the user asked for. `index` < 0 with kCuda means "cuda" without an ordinal (device 0).
struct DeviceRequest {
  enum class Kind { kAuto, kCpu, kCuda };
  Kind kind = Kind::kAuto;
  int index = -1;
  friend bool operator==(const DeviceRequest&, const DeviceRequest&) = default;
};

// What the machine offers: the number of usable CUDA devices, and when there are none, why
// ("CUDA driver version is insufficient for CUDA runtime version (cudaErrorInsufficientDriver)").
struct CudaAvailability {
  int device_count = 0;
  std::string reason;
};

// The outcome of resolving a request: the device, and a one-line explanation of the choice for the log
// ("auto: no CUDA device: <reason>; training on the CPU").
struct DeviceSelection {
  Device device;
  std::string explanation;
};

// The help text for a --device option, shared by every command that has one.
inline constexpr std::string_view kDeviceOptionHelp =
    "where to train: auto (a CUDA GPU when one is usable, else the CPU), cpu, cuda (GPU 0) or cuda:N";

// Parses "auto", "cpu", "cuda" or "cuda:N" (N a non-negative decimal ordinal). Throws DeviceError naming
// the value and the accepted spellings otherwise.
DeviceRequest parse_device(std::string_view text);

// auto → cuda:0 when a device exists, else cpu; cpu → cpu; cuda[:N] → that device, or DeviceError
// ("--device cuda:1: no CUDA device: <reason>" and a second line "hint: use --device cpu ...", or
// "... only 1 CUDA device (cuda:0) ...").
DeviceSelection resolve_device(const DeviceRequest& request, const CudaAvailability& cuda);

// Asks the CUDA runtime (once per call; cheap after the first) how many devices are usable. Never throws
// for a missing driver or device: that is reported in the returned reason.
CudaAvailability probe_cuda();

// resolve_device(parse_device(text), probe_cuda()).
DeviceSelection select_device(std::string_view text);

}  // namespace meridian::models
