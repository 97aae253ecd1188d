#include "gossip/mix_channel.h"

#include <string>

namespace meridian::gossip {

void MixChannel::rethrow_locked() {
  if (error_) std::rethrow_exception(error_);
}

std::vector<float> MixChannel::buffer() {
  std::lock_guard lock(mu_);
  if (spare_.empty()) return {};
  std::vector<float> buf = std::move(spare_.back());
  spare_.pop_back();
  return buf;
}

std::chrono::steady_clock::duration MixChannel::trainer_waited() const {
  std::lock_guard lock(mu_);
  return trainer_waited_;
}

void MixChannel::recycle(std::vector<float> buf) {
  std::lock_guard lock(mu_);
  // A handful of spares covers every job and result in flight; more would only hold memory.
  if (buf.capacity() > 0 && spare_.size() < 16) spare_.push_back(std::move(buf));
}

void MixChannel::submit(MixJob job, std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  const auto waiting_since = Clock::now();
  const bool ready = changed_.wait_for(lock, timeout, [&] { return error_ || closed_ || jobs_.size() < capacity_; });
  trainer_waited_ += Clock::now() - waiting_since;
  if (!ready) throw MixError("mix queue stayed full for step " + std::to_string(job.step));
  rethrow_locked();
  if (closed_) throw MixError("mix channel is closed");
  jobs_.push_back(std::move(job));
  changed_.notify_all();
}

std::optional<MixResult> MixChannel::poll(std::uint64_t step, RoundTag tag) {
  std::lock_guard lock(mu_);
  for (auto it = results_.begin(); it != results_.end(); ++it) {
    if (it->step == step && it->tag == tag) {
      MixResult r = std::move(*it);
      results_.erase(it);
      return r;
    }
  }
  rethrow_locked();
  return std::nullopt;
}

MixResult MixChannel::wait(std::uint64_t step, RoundTag tag, std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  const auto entered = Clock::now();
  // The whole call counts, however it ends; the lock is held again at either end.
  try {
    MixResult r = wait_locked(lock, step, tag, entered + timeout);
    trainer_waited_ += Clock::now() - entered;
    return r;
  } catch (...) {
    trainer_waited_ += Clock::now() - entered;
    throw;
  }
}

MixResult MixChannel::wait_locked(std::unique_lock<std::mutex>& lock, std::uint64_t step, RoundTag tag,
                                  Clock::time_point deadline) {
  for (;;) {
    for (auto it = results_.begin(); it != results_.end(); ++it) {
      if (it->step == step && it->tag == tag) {
        MixResult r = std::move(*it);
        results_.erase(it);
        return r;
      }
    }
    rethrow_locked();
    if (closed_ && jobs_.empty() && running_ == 0)
      throw MixError("mix channel closed before step " + std::to_string(step) + " was mixed");
    if (changed_.wait_until(lock, deadline) == std::cv_status::timeout && Clock::now() >= deadline)
      throw MixError("no mix result for step " + std::to_string(step) + " within the deadline");
  }
}

std::optional<MixJob> MixChannel::next(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  changed_.wait_for(lock, timeout, [&] { return closed_ || !jobs_.empty(); });
  if (jobs_.empty()) return std::nullopt;
  MixJob job = std::move(jobs_.front());
  jobs_.pop_front();
  ++running_;
  changed_.notify_all();
  return job;
}

void MixChannel::complete(MixResult result) {
  std::lock_guard lock(mu_);
  if (running_ > 0) --running_;
  results_.push_back(std::move(result));
  changed_.notify_all();
}

void MixChannel::fail(std::exception_ptr error) {
  std::lock_guard lock(mu_);
  if (!error_) error_ = error;
  if (running_ > 0) --running_;
  jobs_.clear();
  changed_.notify_all();
}

void MixChannel::close() {
  std::lock_guard lock(mu_);
  closed_ = true;
  changed_.notify_all();
}

bool MixChannel::closed() const {
  std::lock_guard lock(mu_);
  return closed_;
}

}  // namespace meridian::gossip
