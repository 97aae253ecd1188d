#include "gossip/inbox.h"

#include <algorithm>

namespace meridian::gossip {

std::optional<peer::Message> Inbox::take(const Match& match, Clock::time_point deadline) {
  for (auto it = stash_.begin(); it != stash_.end(); ++it) {
    if (match(*it)) {
      peer::Message msg = std::move(*it);
      stash_.erase(it);
      return msg;
    }
  }
  for (;;) {
    auto now = Clock::now();
    // Always poll once, even past the deadline, so mail that is already here is not reported missing.
    auto left = std::max(std::chrono::milliseconds(0), std::chrono::ceil<std::chrono::milliseconds>(deadline - now));
    auto msg = transport_.receive(left);
    if (!msg) return std::nullopt;
    if (match(*msg)) return msg;
    stash(std::move(*msg));
    if (Clock::now() >= deadline) {
      // Keep draining what is already queued without waiting, in case the wanted message is behind.
      while (auto more = transport_.receive(std::chrono::milliseconds(0))) {
        if (match(*more)) return more;
        stash(std::move(*more));
      }
      return std::nullopt;
    }
  }
}

std::optional<peer::Received> Inbox::take_into(const Match& wanted, const peer::PayloadSink& sink,
                                               Clock::time_point deadline) {
  for (auto it = stash_.begin(); it != stash_.end(); ++it) {
    if (wanted(*it)) {
      peer::Message msg = std::move(*it);
      stash_.erase(it);
      return transport_.sink_received(sink, std::move(msg));  // stashed mail has its payload in a buffer
    }
  }
  for (bool late = false;;) {
    auto now = Clock::now();
    // Always poll once, even past the deadline, so mail that is already here is not reported missing;
    // past it, keep draining what is already queued without waiting, in case the wanted one is behind.
    auto left = std::max(std::chrono::milliseconds(0), std::chrono::ceil<std::chrono::milliseconds>(deadline - now));
    auto got = transport_.receive_into(sink, late ? std::chrono::milliseconds(0) : left);
    if (!got) return std::nullopt;
    if (got->sunk || wanted(got->msg)) return got;
    stash(std::move(got->msg));
    late = late || Clock::now() >= deadline;
  }
}

void Inbox::stash(peer::Message msg) {
  if (stash_.size() >= kMaxStashed) {
    stash_.pop_front();
    ++overflowed_;
  }
  stash_.push_back(std::move(msg));
}

std::size_t Inbox::pump(std::chrono::milliseconds wait) {
  std::size_t n = 0;
  auto msg = transport_.receive(wait);
  while (msg) {
    stash(std::move(*msg));
    ++n;
    msg = transport_.receive(std::chrono::milliseconds(0));
  }
  return n;
}

std::size_t Inbox::discard_if(const Match& drop) {
  auto before = stash_.size();
  stash_.erase(std::remove_if(stash_.begin(), stash_.end(), drop), stash_.end());
  return before - stash_.size();
}

std::deque<peer::Message> Inbox::take_all(const Match& match) {
  std::deque<peer::Message> out;
  std::deque<peer::Message> keep;
  for (auto& m : stash_) (match(m) ? out : keep).push_back(std::move(m));
  stash_ = std::move(keep);
  return out;
}

}  // namespace meridian::gossip
