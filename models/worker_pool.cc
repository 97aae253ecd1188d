#include "models/worker_pool.h"

#include <stdexcept>

namespace meridian::models {

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
    pending_ = workers_.size();
    error_ = nullptr;
    ++generation_;
  }
  start_.notify_all();
  std::exception_ptr own_error;
  try {
    task(0);
  } catch (...) {
    own_error = std::current_exception();
  }
  std::unique_lock lock(mutex_);
  done_.wait(lock, [this] { return pending_ == 0; });
  task_ = nullptr;
  if (own_error) std::rethrow_exception(own_error);
  if (error_) std::rethrow_exception(error_);
}

void WorkerPool::work(std::size_t index) {
  std::uint64_t seen = 0;
  std::unique_lock lock(mutex_);
  while (true) {
    start_.wait(lock, [&] { return stopping_ || generation_ != seen; });
    if (stopping_) return;
    seen = generation_;
    const auto* task = task_;
    lock.unlock();
    std::exception_ptr error;
    try {
      (*task)(index);
    } catch (...) {
      error = std::current_exception();
    }
    lock.lock();
    if (error && !error_) error_ = error;
    if (--pending_ == 0) done_.notify_one();
  }
}

}  // namespace meridian::models
