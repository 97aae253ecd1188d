// Items waiting for their due time: the transport's I/O loop pushes each outgoing message with the
// delivery time LinkEmulator gave it, polls its sockets no longer than until next_due(), and sends
// what pop_due() hands back. Items come out in due-time order; items due at the same time come out in
// the order they were pushed, so per-link FIFO (non-decreasing due times) survives the queue.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

namespace meridian::peer {

// Not thread-safe: owned by one thread. Storage is kept between pops, so a steady flow of messages
// does not allocate once the queue has reached its working size.
template <class T, class Clock = std::chrono::steady_clock>
class DelayQueue {
 public:
  using time_point = typename Clock::time_point;

  void push(time_point due, T item) {
    heap_.push_back(Entry{due, next_seq_++, std::move(item)});
    std::push_heap(heap_.begin(), heap_.end(), later);
  }

  // The earliest due time, or nullopt when empty.
  std::optional<time_point> next_due() const {
    if (heap_.empty()) return std::nullopt;
    return heap_.front().due;
  }

  // How long a poll may wait before the next item is due: zero if one is already due, nullopt when
  // the queue is empty (wait for other events only).
  std::optional<typename Clock::duration> time_until_due(time_point now) const {
    if (heap_.empty()) return std::nullopt;
    return std::max<typename Clock::duration>(heap_.front().due - now, Clock::duration::zero());
  }

  // Removes and returns the earliest item if it is due at `now` (due <= now), else nullopt. Call it
  // until nullopt to drain everything that is due.
  std::optional<T> pop_due(time_point now) {
    if (heap_.empty() || heap_.front().due > now) return std::nullopt;
    std::pop_heap(heap_.begin(), heap_.end(), later);
    std::optional<T> out(std::move(heap_.back().item));
    heap_.pop_back();
    return out;
  }

  std::size_t size() const { return heap_.size(); }
  bool empty() const { return heap_.empty(); }
  void clear() { heap_.clear(); }

 private:
  struct Entry {
    time_point due;
    std::uint64_t seq;  // push order, breaks ties between equal due times
    T item;
  };
  // std::*_heap build a max-heap; ordering by "later" puts the earliest entry at the front.
  static bool later(const Entry& a, const Entry& b) { return a.due != b.due ? a.due > b.due : a.seq > b.seq; }

  std::vector<Entry> heap_;
  std::uint64_t next_seq_ = 0;
};

}  // namespace meridian::peer
