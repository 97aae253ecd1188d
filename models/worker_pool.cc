#include "models/worker_pool.h"

#include <stdexcept>

namespace meridian::models {
namespace {

// About 20-50 µs of polling: long enough to catch the next hand-off of a running training loop,
// short enough not to matter when the pool sits idle.
constexpr int kSpins = 20000;

}  // namespace

WorkerPool::WorkerPool(std::size_t threads) {
  if (threads == 0) throw std::invalid_argument("worker pool: threads must be >= 1");
  for (std::size_t i = 1; i < threads; ++i) workers_.emplace_back([this, i] { work(i); });
}

WorkerPool::~WorkerPool() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  start_.notify_all();
  for (auto& worker : workers_) worker.join();
}

void WorkerPool::run(const std::function<void(std::size_t)>& task) {
  {
    std::lock_guard lock(mutex_);
    task_ = &task;
    error_ = nullptr;
    pending_.store(workers_.size(), std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);
  }
  start_.notify_all();
  std::exception_ptr own_error;
  try {
    task(0);
  } catch (...) {
    own_error = std::current_exception();
  }
  for (int i = 0; i < kSpins && pending_.load(std::memory_order_acquire) != 0; ++i) {
  }
  std::unique_lock lock(mutex_);
  done_.wait(lock, [this] { return pending_.load(std::memory_order_acquire) == 0; });
  task_ = nullptr;
  if (own_error) std::rethrow_exception(own_error);
  if (error_) std::rethrow_exception(error_);
}

void WorkerPool::work(std::size_t index) {
  std::uint64_t seen = 0;
  while (true) {
    for (int i = 0; i < kSpins && generation_.load(std::memory_order_acquire) == seen; ++i) {
    }
    const std::function<void(std::size_t)>* task = nullptr;
    {
      std::unique_lock lock(mutex_);
      start_.wait(lock, [&] { return stopping_ || generation_.load(std::memory_order_acquire) != seen; });
      if (stopping_) return;
      seen = generation_.load(std::memory_order_acquire);
      task = task_;
    }
    std::exception_ptr error;
    try {
      (*task)(index);
    } catch (...) {
      error = std::current_exception();
    }
    if (error) {
      std::lock_guard lock(mutex_);
      if (!error_) error_ = error;
    }
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      std::lock_guard lock(mutex_);  // pairs with the predicate check in run()
      done_.notify_one();
    }
  }
}

}  // namespace meridian::models
