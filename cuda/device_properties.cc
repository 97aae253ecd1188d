#include "cuda/device_properties.h"

#include <cuda_runtime_api.h>

#include <cstdio>

#include "cuda/error.h"
#include "models/device.h"

namespace meridian::cuda {

std::vector<DeviceProperties> list_devices() {
  std::vector<DeviceProperties> devices;
  const int count = models::probe_cuda().device_count;
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop{};
    // A device that cannot be queried (taken by another process in exclusive mode) is left out rather
    // than failing the whole listing.
    if (cudaGetDeviceProperties(&prop, i) != cudaSuccess) continue;
    devices.push_back({i, prop.name, prop.major, prop.minor, prop.totalGlobalMem, prop.multiProcessorCount});
  }
  return devices;
}

std::string describe(const DeviceProperties& device) {
  char text[256];
  std::snprintf(text, sizeof text, "cuda:%d %s, compute %d.%d, %d SMs, %.1f GiB", device.index, device.name.c_str(),
                device.compute_major, device.compute_minor, device.multiprocessors,
                static_cast<double>(device.total_memory_bytes) / (1024.0 * 1024.0 * 1024.0));
  return text;
}

void use_device(int index) { MERIDIAN_CUDA_CHECK(cudaSetDevice(index)); }

}  // namespace meridian::cuda
