#include "cuda/dnn_handle.h"

#include <utility>

#include "cuda/error.h"

namespace meridian::cuda {

DnnHandle::DnnHandle(cudaStream_t stream) {
  MERIDIAN_CUDNN_CHECK(cudnnCreate(&handle_));
  try {
    MERIDIAN_CUDNN_CHECK(cudnnSetStream(handle_, stream));
  } catch (...) {
    reset();
    throw;
  }
}

DnnHandle::~DnnHandle() { reset(); }

DnnHandle::DnnHandle(DnnHandle&& other) noexcept : handle_(std::exchange(other.handle_, nullptr)) {}

DnnHandle& DnnHandle::operator=(DnnHandle&& other) noexcept {
  if (this != &other) {
    reset();
    handle_ = std::exchange(other.handle_, nullptr);
  }
  return *this;
}

void DnnHandle::reset() noexcept {
  if (handle_ != nullptr) (void)cudnnDestroy(handle_);
  handle_ = nullptr;
}

}  // namespace meridian::cuda
