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

  // A buffer of exactly `n` elements. For `n` of at least kSmallElements, reuses an idle buffer when
  // one has the capacity: preferably the smallest one already holding `n` elements (nothing to write),
  // else the fullest one (growing zero-fills only the new tail). A reused buffer's contents are
  // unspecified (old data). Otherwise, and always for small `n`, a new zero-filled buffer.
  std::vector<float> take(std::size_t n);

  // Hands a buffer back for reuse, as it is (its size is kept, so giving back costs no writes). Empty
  // buffers (capacity 0) are ignored.
  void give(std::vector<float>&& buf);

  // Below this many elements a fresh allocation is cheap (small heap blocks, no page faults) and taking
  // one of the large idle buffers would only shrink it for the next large message.
  static constexpr std::size_t kSmallElements = 4096;

  std::size_t idle() const;

 private:
  std::size_t max_buffers_;
  mutable std::mutex mu_;
  std::vector<std::vector<float>> idle_;
};

}  // namespace meridian::peer
