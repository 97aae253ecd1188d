#include "gossip/mix_server.h"

namespace meridian::gossip {

bool MixServer::serve_one(std::chrono::milliseconds wait) {
  auto job = channel_.next(wait);
  if (!job) return false;
  try {
    Mixer& mixer = job->tag == RoundTag::kReaverage ? averager_ : algorithm_;
    MixResult result{job->step, job->tag, std::move(job->data), job->weight, {}};
    const auto start = std::chrono::steady_clock::now();
    {
      std::lock_guard lock(in_flight_mu_);
      in_flight_ = MixInFlight{result.step, result.tag, start};
    }
    result.report = mixer.mix(result.step, result.tag, result.data, result.weight);
    {
      std::lock_guard lock(in_flight_mu_);
      in_flight_.reset();
    }
    // Only the healthy case is a sample: an abandoned round or a missing push-sum share measured the
    // deadline, not the network.
    if (measured_ && result.report.abandoned == 0 && result.report.missing == 0 && !result.report.sat_out)
      measured_->observe(std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - start));
    channel_.complete(std::move(result));
  } catch (...) {
    {
      std::lock_guard lock(in_flight_mu_);
      in_flight_.reset();
    }
    // Reaches the trainer at its next wait instead of dying silently on this thread.
    channel_.fail(std::current_exception());
  }
  return true;
}

std::optional<MixInFlight> MixServer::in_flight() const {
  std::lock_guard lock(in_flight_mu_);
  return in_flight_;
}

MixThread::MixThread(MixChannel& channel, MixServer& server)
    : channel_(channel), thread_([&channel, &server] {
        // Drains the jobs already submitted after close(); next() returns at once when closed and empty.
        for (;;)
          if (!server.serve_one(std::chrono::milliseconds(20)) && channel.closed()) return;
      }) {}

MixThread::~MixThread() { channel_.close(); }

}  // namespace meridian::gossip
