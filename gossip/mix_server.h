// Runs mix jobs on the communication thread: MixServer::serve_one() is the step a daemon's
// communication loop calls between its other duties (membership, heartbeats, control); MixThread is a
// thread that does nothing else, for tests and simulations.
//
// Jobs tagged RoundTag::kReaverage go to the exact averager (the whole view), everything else to the
// algorithm's mixer (which may be the same averager, for allreduce and dts).
//
// How a daemon wires an algorithm (one Inbox over the site's transport, on the communication thread):
//   allreduce: algorithm = averager = AverageMixer;  trainer: average_now() every step
//   dts:       algorithm = averager = AverageMixer;  trainer: Dts::step() every step, finish() at the end
//              (--exchange direct or compressed: algorithm = averager = DirectMeanMixer, which re-averages
//              dense contributions in its single crossing and hands the other re-averages to the ring)
//   sgp:       algorithm = PushSumMixer;             trainer: PushSum::step() (overlap: DelayedMixingConfig)
//   dsync:     algorithm = GroupMixer;               trainer: DelayedMixing::after_step() after each step
//   local:     no server, no channel.
// The communication loop calls serve_one(short wait) between its other duties; a long mix blocks that
// loop only while it waits for the network (heartbeats then run on the transport's own I/O thread).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "gossip/mix_channel.h"
#include "gossip/mixer.h"

namespace meridian::gossip {

// The mix a server runs now, for status displays.
struct MixInFlight {
  std::uint64_t step = 0;
  RoundTag tag = RoundTag::kMix;
  std::chrono::steady_clock::time_point since;
};

// Thread-safety: serve_one() is called by the communication thread only; in_flight() from any thread.
// Does not own its parts.
class MixServer {
 public:
  // `measured`, when given, learns the duration of every mix that completed without abandoning a
  // round and without sitting out (--round-timeout auto; peer/adaptive_deadline.h).
  MixServer(MixChannel& channel, Mixer& algorithm, Mixer& averager,
            std::shared_ptr<peer::AdaptiveDeadline> measured = nullptr)
      : channel_(channel), algorithm_(algorithm), averager_(averager), measured_(std::move(measured)) {}

  // Runs the next job, waiting up to `wait` for one. Returns false when no job came. A mixer's
  // exception is stored in the channel for the trainer (and returned as true: the job was consumed).
  bool serve_one(std::chrono::milliseconds wait);

  // The mix running now; nullopt between mixes.
  std::optional<MixInFlight> in_flight() const;

 private:
  MixChannel& channel_;
  Mixer& algorithm_;
  Mixer& averager_;
  std::shared_ptr<peer::AdaptiveDeadline> measured_;
  mutable std::mutex in_flight_mu_;
  std::optional<MixInFlight> in_flight_;
};

// A thread that serves `server` until the channel is closed; joins on destruction (closing the channel
// first). The mixers must not be used by anyone else meanwhile.
class MixThread {
 public:
  MixThread(MixChannel& channel, MixServer& server);
  ~MixThread();
  MixThread(const MixThread&) = delete;
  MixThread& operator=(const MixThread&) = delete;

 private:
  MixChannel& channel_;
  std::jthread thread_;
};

}  // namespace meridian::gossip
