#include "peer/send_rate_limit.h"

#include <algorithm>
#include <cmath>

#include "error/error.h"

namespace meridian::peer {

SendRateLimit::SendRateLimit(double bits_per_s, double burst_bytes, Clock::time_point now)
    : bytes_per_s_(bits_per_s / 8), burst_(burst_bytes), tokens_(burst_bytes), last_(now) {
  error::enforce(std::isfinite(bits_per_s) && bits_per_s > 0, "a send rate cap must be a positive rate");
  error::enforce(std::isfinite(burst_bytes) && burst_bytes > 0, "a send rate cap needs a positive burst");
}

double SendRateLimit::default_burst_bytes(double bits_per_s) { return std::max(16.0 * 1024, bits_per_s / 8 * 0.010); }

void SendRateLimit::refill(Clock::time_point now) {
  if (now <= last_) return;
  const double seconds = std::chrono::duration<double>(now - last_).count();
  tokens_ = std::min(burst_, tokens_ + seconds * bytes_per_s_);
  last_ = now;
}

bool SendRateLimit::ready(Clock::time_point now) {
  refill(now);
  return tokens_ >= 0;
}

void SendRateLimit::take(std::size_t bytes) { tokens_ -= static_cast<double>(bytes); }

SendRateLimit::Clock::time_point SendRateLimit::ready_at() const {
  if (tokens_ >= 0) return last_;
  const auto wait = std::chrono::duration<double>(-tokens_ / bytes_per_s_);
  return last_ + std::chrono::ceil<Clock::duration>(wait);
}

}  // namespace meridian::peer
