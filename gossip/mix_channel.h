// The hand-off between the trainer thread and the communication thread.
//
// The trainer submits a MixJob (a snapshot: flat float buffer, weight, step, tag) and goes on
// training; the communication thread takes jobs in submission order, runs the mixer on them and
// posts a MixResult; the trainer picks the result up by (step, tag) when its algorithm needs it (at
// once for allreduce, D steps later for dts and delayed mixing). Buffers travel by move, never by
// copy, and come back through recycle() so a long run does not allocate per step.
//
// Errors: an exception on the communication side (MixError, TransportError, ...) is stored with fail()
// and rethrown to the trainer at its next submit() or wait(). Every wait has a deadline; a wait that
// runs out throws MixError naming the step. After close(), submit() throws and the communication side's
// next() returns nullopt.
//
// Thread-safety: every method may be called from any thread; the intended use is one trainer thread
// (submit, wait, poll, buffer, recycle) and one communication thread (next, complete, fail).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <mutex>
#include <optional>
#include <vector>

#include "gossip/mixer.h"
#include "gossip/round.h"

namespace meridian::gossip {

struct MixJob {
  std::uint64_t step = 0;
  RoundTag tag = RoundTag::kMix;
  std::vector<float> data;
  double weight = 1.0;
};

struct MixResult {
  std::uint64_t step = 0;
  RoundTag tag = RoundTag::kMix;
  std::vector<float> data;  // the mixed snapshot
  double weight = 1.0;
  MixReport report;
};

class MixChannel {
 public:
  // At most `capacity` jobs wait for the communication thread; submit() blocks beyond that.
  explicit MixChannel(std::size_t capacity = 64) : capacity_(capacity) {}

  // --- trainer side ---
  // A buffer for the next snapshot: a recycled one when available (any size; the caller assigns).
  std::vector<float> buffer();
  // Hands `job` to the communication thread. Throws MixError if the channel is closed, or rethrows the
  // communication side's stored exception; throws MixError if the queue stays full for `timeout`.
  void submit(MixJob job, std::chrono::milliseconds timeout = std::chrono::minutes(5));
  // The result of (step, tag), waiting up to `timeout`. Throws as submit() does, or MixError on timeout.
  MixResult wait(std::uint64_t step, RoundTag tag, std::chrono::milliseconds timeout);
  // The result of (step, tag) if it is already there; rethrows a stored exception.
  std::optional<MixResult> poll(std::uint64_t step, RoundTag tag);
  // Returns a result's buffer for reuse.
  void recycle(std::vector<float> buf);
  // The time the trainer side has spent waiting so far, in all: in wait() from call to return or throw
  // (the mix's communication and the other sites it waited for) and in submit() while the queue was
  // full. A wait() that runs out adds at least its timeout.
  std::chrono::steady_clock::duration trainer_waited() const;

  // --- communication side ---
  // The next job in submission order, or nullopt after `timeout` or once closed.
  std::optional<MixJob> next(std::chrono::milliseconds timeout);
  void complete(MixResult result);
  // Stores `error` for the trainer; later jobs are refused.
  void fail(std::exception_ptr error);

  // Either side: no more jobs. Wakes every waiter.
  void close();
  bool closed() const;

 private:
  void rethrow_locked();
  // wait() with mu_ held through `lock`.
  MixResult wait_locked(std::unique_lock<std::mutex>& lock, std::uint64_t step, RoundTag tag,
                        Clock::time_point deadline);

  const std::size_t capacity_;
  mutable std::mutex mu_;
  std::condition_variable changed_;
  std::deque<MixJob> jobs_;
  std::deque<MixResult> results_;
  std::vector<std::vector<float>> spare_;
  std::exception_ptr error_;
  std::size_t running_ = 0;  // jobs taken by next() and not yet completed or failed
  std::chrono::steady_clock::duration trainer_waited_{};
  bool closed_ = false;
};

}  // namespace meridian::gossip
