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
#include <thread>

#include "gossip/mix_channel.h"
#include "gossip/mixer.h"

namespace meridian::gossip {

// Thread-safety: serve_one() is called by the communication thread only. Does not own its parts.
class MixServer {
 public:
  MixServer(MixChannel& channel, Mixer& algorithm, Mixer& averager)
      : channel_(channel), algorithm_(algorithm), averager_(averager) {}

  // Runs the next job, waiting up to `wait` for one. Returns false when no job came. A mixer's
  // exception is stored in the channel for the trainer (and returned as true: the job was consumed).
  bool serve_one(std::chrono::milliseconds wait);

 private:
  MixChannel& channel_;
  Mixer& algorithm_;
  Mixer& averager_;
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
