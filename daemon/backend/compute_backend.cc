#include "daemon/backend/compute_backend.h"

#include "models/cpu_backend.h"

#if MERIDIAN_HAVE_CUDA
#include "cuda/cuda_backend.h"
#endif

namespace meridian::daemon {

std::shared_ptr<models::Backend> make_backend(const models::Device& device) {
  if (!device.is_cuda()) return std::make_shared<models::CpuBackend>(1);
#if MERIDIAN_HAVE_CUDA
  return std::make_shared<cuda::CudaBackend>(device.index);
#else
  // resolve_device never selects CUDA in such a build (probe_cuda reports no device); this guards callers
  // that build a Device by hand.
  throw models::DeviceError("--device " + device.name() + ": this build has no CUDA backend");
#endif
}

}  // namespace meridian::daemon
