// Waiting in tests for something that another thread or process makes true. The bound on a wait is a
// hang guard only: a test asserts what happens, never how fast, so a guard is chosen far beyond any
// expected wait and a timed-out wait simply fails the test's assertion.
#pragma once

#include <chrono>
#include <functional>
#include <thread>

namespace meridian::tests {

// How to poll: give up after `guard`, look again every `interval`.
struct Polling {
  std::chrono::milliseconds guard;
  std::chrono::milliseconds interval;
};

// For state in this process (a transport's members, a mixer's counters): cheap to read, so polled often.
inline constexpr Polling kInProcess{std::chrono::seconds(30), std::chrono::milliseconds(5)};
// For what a child process shows (its files, its log, its metrics endpoint or control socket): read
// seldom enough not to load the process under test, and given longer on a loaded machine.
inline constexpr Polling kFromProcess{std::chrono::seconds(120), std::chrono::milliseconds(50)};

// Calls `condition` until it returns true or `polling.guard` has passed, then once more; returns its
// last value. Runs `condition` on the calling thread only.
inline bool eventually(const std::function<bool()>& condition, Polling polling = kInProcess) {
  const auto deadline = std::chrono::steady_clock::now() + polling.guard;
  while (std::chrono::steady_clock::now() < deadline) {
    if (condition()) return true;
    std::this_thread::sleep_for(polling.interval);
  }
  return condition();
}

}  // namespace meridian::tests
