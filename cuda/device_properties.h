// What the CUDA devices of this machine are: names, compute capability, memory. Used by `meridian
// devices`, the benchmarks and the log line of a CUDA trainer.
//
// Thread safety: any thread. Returns no devices (never throws) when there is no driver or device; the
// reason is in models::probe_cuda().
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace meridian::cuda {

struct DeviceProperties {
  int index = 0;
  std::string name;
  int compute_major = 0;
  int compute_minor = 0;
  std::size_t total_memory_bytes = 0;
  int multiprocessors = 0;
};

// One entry per usable device, in ordinal order; empty when there is none.
std::vector<DeviceProperties> list_devices();

// "cuda:0 NVIDIA A100-SXM4-40GB, compute 8.0, 108 SMs, 40 GiB".
std::string describe(const DeviceProperties& device);

// Makes `index` the calling thread's current device (every later allocation, stream and handle made by
// this thread lives there). Throws meridian::cuda::Error when the ordinal is not usable.
void use_device(int index);

}  // namespace meridian::cuda
