#include "cuda/parameter_snapshot.h"

#include <cstring>
#include <stdexcept>
#include <string>

#include "cuda/error.h"
#include "error/error.h"

namespace meridian::cuda {

ParameterSnapshot::ParameterSnapshot(std::size_t count) : host_(count) {
  // Touch the pinned pages once here, not on the first hand-off (and give wait() a defined answer
  // before any copy).
  if (count > 0) std::memset(host_.data(), 0, count * sizeof(float));
}

void ParameterSnapshot::start(const float* device_params, std::size_t count, cudaStream_t compute) {
  if (count != host_.size()) {
    throw error::InternalError("parameter snapshot sized for " + std::to_string(host_.size()) + " floats was given " +
                               std::to_string(count));
  }
  if (pending_) {
    // The previous copy may still be writing the buffer that the communication thread is about to read.
    throw error::InternalError("parameter snapshot started again before the previous copy was waited for");
  }
  // Event + wait instead of copying on `compute` itself: the copy engine then works alongside the
  // kernels of the next step instead of queueing behind them.
  params_ready_.record(compute);
  params_ready_.make_wait(copy_stream_.get());
  if (count > 0) {
    MERIDIAN_CUDA_CHECK(cudaMemcpyAsync(host_.data(), device_params, count * sizeof(float), cudaMemcpyDeviceToHost,
                                        copy_stream_.get()));
  }
  copied_.record(copy_stream_.get());
  pending_ = true;
}

void ParameterSnapshot::guard_writes(cudaStream_t compute) const {
  if (pending_) copied_.make_wait(compute);
}

bool ParameterSnapshot::ready() const { return !pending_ || copied_.done(); }

std::span<const float> ParameterSnapshot::wait() {
  if (pending_) {
    copied_.synchronize();
    pending_ = false;
  }
  return host_.span();
}

}  // namespace meridian::cuda
