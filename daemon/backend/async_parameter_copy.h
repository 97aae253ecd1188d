// A device → host copy of a parameter buffer that runs in the background, behind the compute already
// enqueued and alongside what is enqueued after it: the trainer's snapshot for the communication thread
// on a GPU (cuda/parameter_snapshot.h through the CUDA backend's compute stream). An interface so that
// daemon/backend/backend_parameters.h, and its tests on the CPU, do not depend on CUDA.
//
// Use, on the trainer thread: start(params, n) after the step that produced the parameters;
// guard_writes() before enqueuing anything that writes them; wait() when the bytes are needed.
//
// Ownership: an implementation owns its host buffer; it borrows the parameters from start() to wait().
// Thread safety: one thread. Throws what the backend throws (meridian::cuda::Error), and
// error::InternalError for a count other than the constructed one or a start() before the previous wait().
#pragma once

#include <cstddef>
#include <memory>
#include <span>

#include "models/backend.h"

namespace meridian::daemon {

class AsyncParameterCopy {
 public:
  virtual ~AsyncParameterCopy() = default;
  // Starts copying `count` floats of backend memory behind the work enqueued so far; returns at once.
  virtual void start(const float* params, std::size_t count) = 0;
  // Makes later backend work wait (on the device) until the copy has read the parameters.
  virtual void guard_writes() = 0;
  // Blocks until the copy has finished; the parameters as they were at start(), valid until the next
  // start().
  virtual std::span<const float> wait() = 0;
};

// A background copy over `backend`'s compute stream with room for `count` floats, or nullptr when the
// backend has none (the CPU backend, or a build without CUDA): callers then read synchronously.
std::unique_ptr<AsyncParameterCopy> make_async_parameter_copy(models::Backend& backend, std::size_t count);

}  // namespace meridian::daemon
