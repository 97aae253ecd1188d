// A fixed set of threads that run one indexed task set at a time: run(task) calls task(i) once for
// every i in [0, size()) and returns when all have finished. The calling thread and the workers claim
// indices as they come, so when the machine is busy and a worker is not scheduled, the caller runs
// the remaining tasks itself instead of waiting for it; tasks must therefore not depend on which
// thread runs them. The model uses it to split a batch across threads.
//
// Thread-safety: run() is called by one thread at a time (the owner). The destructor stops and joins
// the workers. If tasks throw, run() rethrows the first exception after all tasks have finished.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <type_traits>
#include <mutex>
#include <thread>
#include <vector>

namespace meridian::models {

class WorkerPool {
 public:
  // threads >= 1; starts threads − 1 workers.
  explicit WorkerPool(std::size_t threads);
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  std::size_t size() const { return workers_.size() + 1; }
  // `task` is any callable taking the index; it is called by reference, never copied, so a step
  // allocates nothing (std::function would for lambdas capturing more than two references).
  template <typename Task>
  void run(Task&& task) {
    using T = std::remove_reference_t<Task>;
    run(Call{const_cast<void*>(static_cast<const void*>(&task)),
             [](void* t, std::size_t i) { (*static_cast<T*>(t))(i); }});
  }

 private:
  struct Call {
    void* context = nullptr;
    void (*invoke)(void*, std::size_t) = nullptr;
  };
  void run(Call call);
  void work();
  // Claims and runs tasks of generation `generation` until none is left.
  void run_tasks(std::uint32_t generation, Call call);

  // Hand-offs happen once or twice per training step, a few hundred microseconds apart, so both sides
  // spin briefly on the atomics before sleeping on the condition variables.
  std::mutex mutex_;
  std::condition_variable start_, done_;
  Call task_;                             // guarded by mutex_
  std::uint32_t generation_ = 0;          // guarded by mutex_
  std::atomic<std::uint64_t> claim_{0};   // (generation << 32) | next unclaimed task index
  std::atomic<std::size_t> finished_{0};  // tasks of the current generation that have finished
  bool stopping_ = false;                 // guarded by mutex_
  std::exception_ptr error_;
  std::vector<std::thread> workers_;
};

}  // namespace meridian::models
