// An owned array in device memory.
//
// Ownership: cudaMalloc in the constructor, cudaFree in the destructor; move-only. The contents start
// undefined (call zero()). Thread safety: none of its own; enqueue copies from the thread that owns the
// stream. Throws meridian::cuda::Error when allocation or an enqueue fails (out of memory, no device).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

#include "cuda/error.h"
#include "error/error.h"

namespace meridian::cuda {

template <typename T>
class DeviceBuffer {
  static_assert(std::is_trivially_copyable_v<T>, "device memory holds trivially copyable values only");

 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t count) : count_(count) {
    if (count_ > 0) MERIDIAN_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&data_), bytes()));
  }
  ~DeviceBuffer() { reset(); }
  DeviceBuffer(DeviceBuffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), count_(std::exchange(other.count_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    if (this != &other) {
      reset();
      data_ = std::exchange(other.data_, nullptr);
      count_ = std::exchange(other.count_, 0);
    }
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  T* data() noexcept { return data_; }
  const T* data() const noexcept { return data_; }
  std::size_t size() const noexcept { return count_; }
  std::size_t bytes() const noexcept { return count_ * sizeof(T); }

  // Enqueues host → device on `stream`. With pageable `host` memory the call returns only after the
  // runtime has staged it; pass pinned memory (PinnedBuffer) for a truly asynchronous copy. Throws
  // error::InternalError when the sizes differ.
  void copy_from_host(std::span<const T> host, cudaStream_t stream) {
    expect_size(host.size());
    if (count_ > 0) MERIDIAN_CUDA_CHECK(cudaMemcpyAsync(data_, host.data(), bytes(), cudaMemcpyHostToDevice, stream));
  }
  // Enqueues device → host on `stream`; `host` is valid once the stream (or an event after the copy) has
  // finished. Throws error::InternalError when the sizes differ.
  void copy_to_host(std::span<T> host, cudaStream_t stream) const {
    expect_size(host.size());
    if (count_ > 0) MERIDIAN_CUDA_CHECK(cudaMemcpyAsync(host.data(), data_, bytes(), cudaMemcpyDeviceToHost, stream));
  }
  // Enqueues all-zero bytes on `stream`.
  void zero(cudaStream_t stream) {
    if (count_ > 0) MERIDIAN_CUDA_CHECK(cudaMemsetAsync(data_, 0, bytes(), stream));
  }

 private:
  void expect_size(std::size_t host_count) const {
    if (host_count != count_) {
      throw error::InternalError("device buffer of " + std::to_string(count_) +
                                 " elements cannot be copied to or from " + std::to_string(host_count) +
                                 " host elements");
    }
  }
  void reset() noexcept {
    // cudaFree synchronizes with the device; a failure here (sticky device error) cannot be reported.
    if (data_ != nullptr) (void)cudaFree(data_);
    data_ = nullptr;
    count_ = 0;
  }

  T* data_ = nullptr;
  std::size_t count_ = 0;
};

}  // namespace meridian::cuda
