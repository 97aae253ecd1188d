#include "models/worker_pool.h"

#include <stdexcept>

#include "error/error.h"

namespace meridian::models {
namespace {

// About 20-50 µs of polling: long enough to catch the next hand-off of a running training loop,
// short enough not to matter when the pool sits idle.
constexpr int kSpins = 20000;

}  // namespace

WorkerPool::WorkerPool(std::size_t threads) {
  if (threads == 0) throw error::UserError("worker pool: threads must be >= 1");
  for (std::size_t i = 1; i < threads; ++i) workers_.emplace_back([this] { work(); });
}

WorkerPool::~WorkerPool() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  start_.notify_all();
  for (auto& worker : workers_) worker.join();
}

void WorkerPool::run_tasks(std::uint32_t generation, Call call) {
  const std::uint64_t tag = static_cast<std::uint64_t>(generation) << 32;
  std::uint64_t claim = claim_.load(std::memory_order_acquire);
  while (true) {
    // A worker that woke up late must not take tasks of a later generation with this task's pointer.
    if ((claim & ~0xffffffffULL) != tag || (claim & 0xffffffffULL) >= size()) return;
    if (!claim_.compare_exchange_weak(claim, claim + 1, std::memory_order_acq_rel)) continue;
    const std::size_t index = static_cast<std::size_t>(claim & 0xffffffffULL);
    try {
      call.invoke(call.context, index);
    } catch (...) {
      std::lock_guard lock(mutex_);
      if (!error_) error_ = std::current_exception();
    }
    if (finished_.fetch_add(1, std::memory_order_acq_rel) + 1 == size()) {
      std::lock_guard lock(mutex_);  // pairs with the predicate check in run()
      done_.notify_one();
    }
    claim = claim_.load(std::memory_order_acquire);
  }
}

void WorkerPool::run(Call call) {
  std::uint32_t generation;
  {
    std::lock_guard lock(mutex_);
    task_ = call;
    error_ = nullptr;
    generation = ++generation_;
    finished_.store(0, std::memory_order_relaxed);
    claim_.store(static_cast<std::uint64_t>(generation) << 32, std::memory_order_release);
  }
  start_.notify_all();
  run_tasks(generation, call);
  for (int i = 0; i < kSpins && finished_.load(std::memory_order_acquire) != size(); ++i) {
  }
  std::unique_lock lock(mutex_);
  done_.wait(lock, [this] { return finished_.load(std::memory_order_acquire) == size(); });
  task_ = Call{};
  if (error_) std::rethrow_exception(error_);
}

void WorkerPool::work() {
  std::uint64_t seen = 0;
  while (true) {
    for (int i = 0; i < kSpins && (claim_.load(std::memory_order_acquire) >> 32) == seen; ++i) {
    }
    Call call;
    std::uint32_t generation;
    {
      std::unique_lock lock(mutex_);
      start_.wait(lock, [&] { return stopping_ || generation_ != seen; });
      if (stopping_) return;
      generation = generation_;
      seen = generation;
      call = task_;
    }
    if (call.invoke != nullptr) run_tasks(generation, call);
  }
}

}  // namespace meridian::models
