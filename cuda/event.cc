#include "cuda/event.h"

#include <utility>

#include "cuda/error.h"

namespace meridian::cuda {

Event::Event(Timing timing) {
  const unsigned flags = timing == Timing::kOn ? cudaEventDefault : cudaEventDisableTiming;
  MERIDIAN_CUDA_CHECK(cudaEventCreateWithFlags(&event_, flags));
}

Event::~Event() { reset(); }

Event::Event(Event&& other) noexcept : event_(std::exchange(other.event_, nullptr)) {}

Event& Event::operator=(Event&& other) noexcept {
  if (this != &other) {
    reset();
    event_ = std::exchange(other.event_, nullptr);
  }
  return *this;
}

void Event::record(cudaStream_t stream) { MERIDIAN_CUDA_CHECK(cudaEventRecord(event_, stream)); }

void Event::make_wait(cudaStream_t stream) const { MERIDIAN_CUDA_CHECK(cudaStreamWaitEvent(stream, event_, 0)); }

bool Event::done() const {
  const cudaError_t status = cudaEventQuery(event_);
  if (status == cudaErrorNotReady) {
    // Not a failure, but the runtime may keep it as the thread's last error; clear it so that the next
    // MERIDIAN_CUDA_CHECK_LAUNCH does not mistake it for a bad launch (launch errors are checked right
    // after each launch, so nothing real is lost here).
    (void)cudaGetLastError();
    return false;
  }
  MERIDIAN_CUDA_CHECK(status);
  return true;
}

void Event::synchronize() const { MERIDIAN_CUDA_CHECK(cudaEventSynchronize(event_)); }

float Event::elapsed_ms(const Event& start, const Event& end) {
  float ms = 0.0f;
  MERIDIAN_CUDA_CHECK(cudaEventElapsedTime(&ms, start.event_, end.event_));
  return ms;
}

void Event::reset() noexcept {
  if (event_ != nullptr) (void)cudaEventDestroy(event_);
  event_ = nullptr;
}

}  // namespace meridian::cuda
