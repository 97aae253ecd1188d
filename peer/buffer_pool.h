// A small pool of float buffers that the transport reuses for received payloads and that finished
// sends return to. Large fresh allocations cost a page fault per 4 KiB page on first touch, which on
// loopback costs as much as the transfer itself; reusing buffers avoids that.
#pragma once

#include <cstddef>
#include <mutex>
#include <vector>

namespace meridian::peer {

// Thread-safe: any thread may take() and give() (libzmq's I/O thread gives back sent payloads).
class BufferPool {
 public:
  // Keeps at most `max_buffers` idle buffers; extra ones given back are freed.
  explicit BufferPool(std::size_t max_buffers = 8) : max_buffers_(max_buffers) {}

  // A buffer of exactly `n` elements. Reuses an idle buffer whose capacity is at least `n` when one
  // exists (the smallest such); its contents are unspecified (old data), not zeroed. Otherwise a new,
  // zero-filled buffer.
  std::vector<float> take(std::size_t n);

  // Hands a buffer back for reuse. Empty buffers (capacity 0) are ignored.
  void give(std::vector<float>&& buf);

  std::size_t idle() const;

 private:
  std::size_t max_buffers_;
  mutable std::mutex mu_;
  std::vector<std::vector<float>> idle_;
};

}  // namespace meridian::peer
