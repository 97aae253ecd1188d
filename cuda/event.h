// An owned CUDA event: marks a point in a stream that another stream or the host can wait for.
//
// Ownership: created in the constructor, destroyed in the destructor; move-only. Thread safety: record
// from the thread that owns the stream; query/synchronize from any thread. Throws meridian::cuda::Error
// on failure.
#pragma once

#include <cuda_runtime_api.h>

namespace meridian::cuda {

class Event {
 public:
  enum class Timing { kOff, kOn };
  // Timing off (the default) makes record and wait cheaper; turn it on only for elapsed_ms.
  explicit Event(Timing timing = Timing::kOff);
  ~Event();
  Event(Event&& other) noexcept;
  Event& operator=(Event&& other) noexcept;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  cudaEvent_t get() const noexcept { return event_; }
  // Marks the current end of `stream`'s work.
  void record(cudaStream_t stream);
  // Makes `stream` wait (on the device, without blocking the host) for the work recorded by this event.
  void make_wait(cudaStream_t stream) const;
  // True when the recorded work has finished (or nothing was recorded); never blocks.
  bool done() const;
  // Blocks the host until the recorded work has finished.
  void synchronize() const;
  // Milliseconds between two recorded timing events; both must have finished.
  static float elapsed_ms(const Event& start, const Event& end);

 private:
  void reset() noexcept;
  cudaEvent_t event_ = nullptr;
};

}  // namespace meridian::cuda
