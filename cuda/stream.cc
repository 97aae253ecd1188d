#include "cuda/stream.h"

#include <utility>

#include "cuda/error.h"

namespace meridian::cuda {

Stream::Stream() { MERIDIAN_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking)); }

Stream::~Stream() { reset(); }

Stream::Stream(Stream&& other) noexcept : stream_(std::exchange(other.stream_, nullptr)) {}

Stream& Stream::operator=(Stream&& other) noexcept {
  if (this != &other) {
    reset();
    stream_ = std::exchange(other.stream_, nullptr);
  }
  return *this;
}

void Stream::synchronize() const { MERIDIAN_CUDA_CHECK(cudaStreamSynchronize(stream_)); }

void Stream::reset() noexcept {
  // A destructor cannot throw; after a sticky device error the destroy call fails too and there is
  // nothing better to do than to let the process tear the context down.
  if (stream_ != nullptr) (void)cudaStreamDestroy(stream_);
  stream_ = nullptr;
}

}  // namespace meridian::cuda
