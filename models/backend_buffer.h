// A typed array in memory the backend's operations can address (models/backend_memory.h): the storage of
// parameters, gradients, activations, layer workspaces and optimizer state. On the CPU backend it is
// host memory, on the CUDA backend device memory the host must not dereference; Backend::copy_to_host and
// copy_from_host move data across.
//
// Ownership: move-only owner of its block. New memory is zeroed. The buffer must not outlive the backend
// that allocated it. Thread safety: none (the trainer thread). Throws what Backend::allocate throws
// (std::bad_alloc, meridian::cuda::Error).
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <type_traits>
#include <utility>

#include "models/backend.h"
#include "models/backend_memory.h"

namespace meridian::models {

template <typename T>
class BackendBuffer {
  static_assert(std::is_trivially_copyable_v<T>, "backend memory holds trivially copyable values only");

 public:
  BackendBuffer() = default;
  // `count` zeroed elements allocated from `backend`.
  BackendBuffer(Backend& backend, std::size_t count) : count_(count) {
    if (count_ == 0) return;
    memory_ = backend.allocate(count_ * sizeof(T));
    data_ = static_cast<T*>(memory_->data());
  }
  BackendBuffer(BackendBuffer&& other) noexcept
      : memory_(std::move(other.memory_)),
        data_(std::exchange(other.data_, nullptr)),
        count_(std::exchange(other.count_, 0)) {}
  BackendBuffer& operator=(BackendBuffer&& other) noexcept {
    memory_ = std::move(other.memory_);
    data_ = std::exchange(other.data_, nullptr);
    count_ = std::exchange(other.count_, 0);
    return *this;
  }

  T* data() noexcept { return data_; }
  const T* data() const noexcept { return data_; }
  std::size_t size() const noexcept { return count_; }
  bool empty() const noexcept { return count_ == 0; }
  // A span over backend memory: host-dereferenceable only when the backend is host_addressable().
  std::span<T> span() noexcept { return {data_, count_}; }
  std::span<const T> span() const noexcept { return {data_, count_}; }

  // Grows to at least `count` elements: a new zeroed block, the old contents dropped. Never shrinks, so a
  // workspace sized for the largest batch is allocated once.
  void reserve(Backend& backend, std::size_t count) {
    if (count > count_) *this = BackendBuffer(backend, count);
  }

 private:
  std::unique_ptr<BackendMemory> memory_;
  T* data_ = nullptr;
  std::size_t count_ = 0;
};

}  // namespace meridian::models
