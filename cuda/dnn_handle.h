// An owned cuDNN handle bound to one stream.
//
// Ownership: cudnnCreate in the constructor, cudnnDestroy in the destructor; move-only. Thread safety: a
// handle belongs to one host thread (the trainer). Throws meridian::cuda::Error when cuDNN cannot start
// (no device, no driver, a cuDNN built for another CUDA) or the stream cannot be set.
#pragma once

#include <cuda_runtime_api.h>
#include <cudnn.h>

namespace meridian::cuda {

class DnnHandle {
 public:
  // Every later call through this handle is enqueued on `stream` (nullptr: the legacy default stream).
  explicit DnnHandle(cudaStream_t stream);
  ~DnnHandle();
  DnnHandle(DnnHandle&& other) noexcept;
  DnnHandle& operator=(DnnHandle&& other) noexcept;
  DnnHandle(const DnnHandle&) = delete;
  DnnHandle& operator=(const DnnHandle&) = delete;

  cudnnHandle_t get() const noexcept { return handle_; }

 private:
  void reset() noexcept;
  cudnnHandle_t handle_ = nullptr;
};

}  // namespace meridian::cuda
