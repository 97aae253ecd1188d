// A value several threads share, reachable only while its lock is held: lock() returns a handle that
// holds the lock for as long as it lives and reaches the value through -> and *, so no code can read
// or change the value without the lock. Each part of the site daemon's state that is guarded this
// way says which threads lock it (daemon/site_daemon_impl.h).
// Thread-safety: lock() and copy() from any thread; a handle belongs to the thread that took it, and
// a thread holds one handle of a value at a time (the lock is not recursive).
#pragma once

#include <mutex>
#include <utility>

namespace meridian::daemon {

template <class T>
class Guarded {
 public:
  template <class U>
  class Handle {
   public:
    Handle(std::mutex& mu, U& value) : lock_(mu), value_(value) {}
    U* operator->() const { return &value_; }
    U& operator*() const { return value_; }

   private:
    std::lock_guard<std::mutex> lock_;
    U& value_;
  };

  Guarded() = default;
  explicit Guarded(T value) : value_(std::move(value)) {}

  Handle<T> lock() { return {mu_, value_}; }
  Handle<const T> lock() const { return {mu_, value_}; }
  // A copy of the value, taken under the lock.
  T copy() const { return *lock(); }

 private:
  mutable std::mutex mu_;
  T value_;
};

}  // namespace meridian::daemon
