// The trainer's hand-off of its parameters to the communication thread on a GPU: a device → pinned host
// copy on a stream of its own, so the copy runs while the compute stream goes on with the next forward
// and backward pass.
//
// Use, all on the trainer thread, once per step that the schedule snapshots:
//   snapshot.start(params, count, compute);   // returns at once; the copy waits for the step's update
//   ... enqueue forward/backward of the next step on `compute` (they only read the parameters) ...
//   snapshot.guard_writes(compute);           // before enqueuing the optimizer update that writes them
//   std::span<const float> x_s = snapshot.wait();   // blocks only if the copy has not finished yet
// then hand x_s (or a copy of it) to the communication thread. The span stays valid and unchanged until
// the next start(); a trainer with several snapshots in flight (delay D > 0) keeps one object per slot.
//
// Ownership: owns the pinned host buffer, the copy stream and two events; move-only. Thread safety: one
// thread at a time. Throws meridian::cuda::Error when CUDA fails (at construction when there is no
// device), error::InternalError when `count` differs from the size given at construction, and
// when start() is called while the previous copy has not been waited for.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <span>

#include "cuda/event.h"
#include "cuda/pinned_buffer.h"
#include "cuda/stream.h"

namespace meridian::cuda {

class ParameterSnapshot {
 public:
  // Pinned room for `count` floats; the copy stream lives on the calling thread's current device.
  explicit ParameterSnapshot(std::size_t count);

  // Enqueues the copy of `device_params` (`count` floats in device memory) behind everything enqueued on
  // `compute` so far. Does not block the host.
  void start(const float* device_params, std::size_t count, cudaStream_t compute);

  // Makes `compute` wait (on the device) until the copy has read the parameters. No-op when no copy was
  // started.
  void guard_writes(cudaStream_t compute) const;

  // True when no copy is pending or the pending one has finished; never blocks.
  bool ready() const;

  // Blocks until the pending copy has finished and returns the parameters as they were at start().
  // Without a pending copy, returns the last snapshot taken (zeros before the first).
  std::span<const float> wait();

  std::size_t size() const noexcept { return host_.size(); }

 private:
  PinnedBuffer<float> host_;
  Stream copy_stream_;
  Event params_ready_;  // recorded on the compute stream: the parameters of this step are final
  Event copied_;        // recorded on the copy stream: the host buffer holds them
  bool pending_ = false;
};

}  // namespace meridian::cuda
