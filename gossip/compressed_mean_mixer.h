// The mean over the view of contributions that travel compressed (fp16, or top-k with error feedback):
// dts' gradient / window-displacement average when a site configures --compression. Each site
// compresses input + its residual (gossip/error_feedback.h), sends the packed tensor to every other
// member (one kCompressedShare message each, no relay: one WAN hop instead of the ring's 2(n − 1)),
// and every site sums the decoded contributions in rank order and divides by n. Every site therefore
// holds the same bits, as after the exact ring; the mean is the exact mean of what was sent, and what
// compression cut stays in each sender's residual and goes out with its next contribution.
//
// Only RoundTag::kMix is compressed; every other tag (the periodic exact re-average) goes to the exact
// mixer given to the constructor, so replicas and residual-free parameters still meet exactly.
//
// Rounds and faults as AverageMixer: a round not complete by its deadline is abandoned (counted), the
// input and the residual restored, and redone in the newer view membership announces. Incoming shares
// are decoded and validated (length, indices, finite values); a bad one is dropped and counted in
// rejected(), and the round then waits for a valid one until its deadline.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "gossip/error_feedback.h"
#include "gossip/inbox.h"
#include "gossip/mixer.h"
#include "gossip/redo_view.h"

namespace meridian::gossip {

// Thread-safety: none (communication thread only), except the counters. Does not own the inbox or
// the exact mixer, which must outlive it.
class CompressedMeanMixer final : public Mixer {
 public:
  // `spec` must not be kDense (throws std::invalid_argument).
  CompressedMeanMixer(Inbox& inbox, Mixer& exact, CompressionSpec spec, RoundTimeouts timeouts = {});

  // kMix: replaces `data` by the mean of the members' compressed contributions. Other tags: the exact
  // mixer's mix. Throws MixError like AverageMixer.
  MixReport mix(std::uint64_t step, RoundTag tag, std::span<float> data, double& weight) override;

  std::uint64_t abandoned() const { return abandoned_.load(); }
  // What compression has cut and not sent yet (this site's error-feedback residual). Communication
  // thread only, or after it stopped.
  std::span<const float> residual() const { return feedback_.residual(); }
  std::uint64_t rejected() const { return rejected_.load(); }

 private:
  Inbox& inbox_;
  Mixer& exact_;
  ErrorFeedback feedback_;
  RoundTimeouts timeouts_;
  RedoView redo_;
  std::vector<float> input_;     // (n) the caller's data, to redo an abandoned round
  std::vector<float> residual_;  // (n) the residual before this round, likewise
  std::vector<float> packed_;    // this site's packed contribution
  std::vector<float> own_;       // (n) this site's decoded contribution
  std::vector<float> decoded_;   // (n) a peer's decoded contribution
  std::atomic<std::uint64_t> abandoned_{0};
  std::atomic<std::uint64_t> rejected_{0};
};

}  // namespace meridian::gossip
