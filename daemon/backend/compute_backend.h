// The compute backend for a resolved --device (models/device.h): the CPU backend, or in a CUDA build the
// CUDA backend on cuda:N. The one place outside cuda/ that names the CUDA backend, so the trainer, the
// CLI and the benchmarks choose a device the same way.
//
// Thread safety: call from the thread that will own the backend (the CUDA backend makes its device
// current for the calling thread). Throws models::DeviceError for a CUDA device in a build without the
// CUDA backend, and meridian::cuda::Error when the device cannot be initialized.
#pragma once

#include <memory>

#include "models/backend.h"
#include "models/device.h"

namespace meridian::daemon {

std::shared_ptr<models::Backend> make_backend(const models::Device& device);

}  // namespace meridian::daemon
