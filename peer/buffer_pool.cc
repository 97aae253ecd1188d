#include "peer/buffer_pool.h"

#include <algorithm>

namespace meridian::peer {

std::vector<float> BufferPool::take(std::size_t n) {
  std::vector<float> buf;
  if (n >= kSmallElements) {
    std::lock_guard lock(mu_);
    auto best = idle_.end();
    for (auto it = idle_.begin(); it != idle_.end(); ++it) {
      if (it->capacity() < n) continue;
      if (best == idle_.end()) {
        best = it;
        continue;
      }
      // Rank: holding n already (smaller size first), then the largest size (least to zero-fill).
      const bool it_holds = it->size() >= n, best_holds = best->size() >= n;
      if (it_holds != best_holds ? it_holds : (it_holds ? it->size() < best->size() : it->size() > best->size()))
        best = it;
    }
    if (best != idle_.end()) {
      buf = std::move(*best);
      idle_.erase(best);
    }
  }
  // Shrinking keeps the already-touched pages and writes nothing; growing zero-fills only the tail.
  // The same sizes come back in the steady state (ring pieces, chunked messages), so it writes nothing.
  buf.resize(n);
  return buf;
}

void BufferPool::give(std::vector<float>&& buf) {
  if (buf.capacity() == 0) return;
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
