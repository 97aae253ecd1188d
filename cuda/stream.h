// An owned CUDA stream.
//
// Ownership: creates a non-blocking stream on the current device in the constructor, destroys it in the
// destructor; move-only. Thread safety: a stream may be used from several host threads (the runtime
// serializes), but Meridian gives each stream one owner thread (the trainer's compute stream, the
// snapshot's copy stream). Throws meridian::cuda::Error when the stream cannot be created (no driver, no
// device) or a synchronize reports an asynchronous failure.
#pragma once

#include <cuda_runtime_api.h>

namespace meridian::cuda {

class Stream {
 public:
  // Non-blocking: does not synchronize with the legacy default stream, so work on other streams overlaps.
  Stream();
  ~Stream();
  Stream(Stream&& other) noexcept;
  Stream& operator=(Stream&& other) noexcept;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  cudaStream_t get() const noexcept { return stream_; }
  // Blocks until all work enqueued so far has finished; throws Error on an asynchronous failure.
  void synchronize() const;

 private:
  void reset() noexcept;
  cudaStream_t stream_ = nullptr;
};

}  // namespace meridian::cuda
