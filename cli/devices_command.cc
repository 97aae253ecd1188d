// `meridian devices`: what this machine can train on, and what a --device value would select. The same
// resolution runs when a training command starts, so this is the way to check a site's set-up (driver,
// toolkit, GPU) before joining a federation.
#include <cstdio>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "models/device.h"

#if MERIDIAN_HAVE_CUDA
#include "cuda/device_properties.h"
#endif

namespace meridian::cli {

void add_devices_command(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("devices", "List the CUDA devices and show which device --device selects");
  cmd->footer(
      "Exits 1 with the reason when the requested device is not usable, e.g. on a machine without a GPU:\n"
      "  $ meridian devices --device cuda\n"
      "  meridian: error: --device cuda: no CUDA device: CUDA driver version is insufficient ...\n"
      "Example:\n"
      "  meridian devices                 # list devices; show what --device auto picks");
  auto device = std::make_shared<std::string>("auto");
  cmd->add_option("--device", *device, std::string(models::kDeviceOptionHelp))->capture_default_str();
  cmd->callback([device, &exit_code] {
    // Parse first: a typo is reported before anything is probed or printed (throws DeviceError).
    const models::DeviceRequest request = models::parse_device(*device);
    const models::CudaAvailability cuda = models::probe_cuda();
    if (cuda.device_count == 0) {
      std::printf("CUDA: no CUDA device: %s\n", cuda.reason.c_str());
    } else {
      std::printf("CUDA: %d device(s)\n", cuda.device_count);
#if MERIDIAN_HAVE_CUDA
      for (const auto& d : meridian::cuda::list_devices()) std::printf("  %s\n", meridian::cuda::describe(d).c_str());
#endif
    }
    // Throws DeviceError with the reason; main prints it and exits 1.
    const models::DeviceSelection selection = models::resolve_device(request, cuda);
    std::printf("--device %s selects %s (%s)\n", device->c_str(), selection.device.name().c_str(),
                selection.explanation.c_str());
    exit_code = 0;
  });
}

}  // namespace meridian::cli
