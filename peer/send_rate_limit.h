// A cap on the bytes a site sends (--max-send-rate): a token bucket over every message the ZeroMQ
// transport hands to libzmq, on all links together, so that a hospital's shared uplink sees at most the
// cap, whatever the algorithm and the WAN emulation do.
//
// The bucket fills at the cap's rate up to `burst` bytes. A chunk may leave while the bucket is not in
// debt and takes its bytes from it, going into debt when it is larger than what is left (a 1 MiB chunk
// under a small burst); the next waits until the debt is paid. So over any window of T seconds the
// bytes that leave are at most burst + rate·T + one chunk, which tests/peer/send_rate_limit_test.cc
// checks with a clock it drives itself.
//
// Thread-safety: none; the transport's loop owns it (peer/zmq/zmq_io_loop.h).
#pragma once

#include <chrono>
#include <cstddef>

namespace meridian::peer {

class SendRateLimit {
 public:
  using Clock = std::chrono::steady_clock;

  // `bits_per_s` > 0, `burst_bytes` > 0; the bucket starts full at `now`.
  SendRateLimit(double bits_per_s, double burst_bytes, Clock::time_point now);

  // The burst the transport gives a cap: 10 ms of it, at least 16 KiB (a few membership messages
  // leave at once after an idle spell; a large payload still goes chunk by chunk).
  static double default_burst_bytes(double bits_per_s);

  // Whether a chunk may leave at `now`: the bucket is not in debt. Times before the last one seen
  // count as that one (the clock never runs back).
  [[nodiscard]] bool ready(Clock::time_point now);
  // Takes `bytes` that just left (possibly into debt).
  void take(std::size_t bytes);
  // When ready() turns true: at once when it is, else when the debt is paid at the cap's rate.
  Clock::time_point ready_at() const;

  double bits_per_s() const { return bytes_per_s_ * 8; }

 private:
  void refill(Clock::time_point now);

  double bytes_per_s_;
  double burst_;
  double tokens_;  // bytes; negative: debt
  Clock::time_point last_;
};

}  // namespace meridian::peer
