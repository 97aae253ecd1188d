#include "peer/buffer_pool.h"

#include <algorithm>

namespace meridian::peer {

std::vector<float> BufferPool::take(std::size_t n) {
  std::vector<float> buf;
  {
    std::lock_guard lock(mu_);
    auto best = idle_.end();
    for (auto it = idle_.begin(); it != idle_.end(); ++it)
      if (it->capacity() >= n && (best == idle_.end() || it->capacity() < best->capacity())) best = it;
    if (best != idle_.end()) {
      buf = std::move(*best);
      idle_.erase(best);
    }
  }
  // Shrinking keeps the already-touched pages and writes nothing; growing only zero-fills the tail.
  // Buffers are given back at their full size, so the steady state (same sizes) writes nothing here.
  buf.resize(n);
  return buf;
}

void BufferPool::give(std::vector<float>&& buf) {
  if (buf.capacity() == 0) return;
  // Restore the full size so a later take() of the same size does not zero-fill again.
  buf.resize(buf.capacity());
  std::lock_guard lock(mu_);
  if (idle_.size() < max_buffers_) {
    idle_.push_back(std::move(buf));
    return;
  }
  // Full: keep the larger buffers, they are the expensive ones to fault in again.
  auto smallest = std::min_element(idle_.begin(), idle_.end(),
                                   [](const auto& a, const auto& b) { return a.capacity() < b.capacity(); });
  if (smallest->capacity() < buf.capacity()) *smallest = std::move(buf);
}

std::size_t BufferPool::idle() const {
  std::lock_guard lock(mu_);
  return idle_.size();
}

}  // namespace meridian::peer
