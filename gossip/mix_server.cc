#include "gossip/mix_server.h"

namespace meridian::gossip {

bool MixServer::serve_one(std::chrono::milliseconds wait) {
  auto job = channel_.next(wait);
  if (!job) return false;
  try {
    Mixer& mixer = job->tag == RoundTag::kReaverage ? averager_ : algorithm_;
    MixResult result{job->step, job->tag, std::move(job->data), job->weight, {}};
    result.report = mixer.mix(result.step, result.tag, result.data, result.weight);
    channel_.complete(std::move(result));
  } catch (...) {
    // Reaches the trainer at its next wait instead of dying silently on this thread.
    channel_.fail(std::current_exception());
  }
  return true;
}

MixThread::MixThread(MixChannel& channel, MixServer& server)
    : channel_(channel), thread_([&channel, &server] {
        // Drains the jobs already submitted after close(); next() returns at once when closed and empty.
        for (;;)
          if (!server.serve_one(std::chrono::milliseconds(20)) && channel.closed()) return;
      }) {}

MixThread::~MixThread() { channel_.close(); }

}  // namespace meridian::gossip
