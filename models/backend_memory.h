// One block of memory that a Backend's operations can address: host memory for the CPU backend, device
// memory for the CUDA backend. Backend::allocate() makes it; BackendBuffer<T> (backend_buffer.h) is the
// typed owner that layers, models and optimizers hold.
//
// Ownership: the object owns the block and frees it in its destructor; it must not outlive the backend
// that allocated it. Thread safety: none of its own (the trainer thread uses it).
#pragma once

#include <cstddef>

namespace meridian::models {

class BackendMemory {
 public:
  virtual ~BackendMemory() = default;
  // The block's first byte (suitably aligned for float and int32); null for a zero-byte block.
  virtual void* data() noexcept = 0;
  virtual std::size_t bytes() const noexcept = 0;
};

}  // namespace meridian::models
