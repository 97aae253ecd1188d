// The mean over the view by direct exchange: every site sends its contribution to every other member
// (one kCompressedShare message each, no relay: one WAN hop instead of the ring's 2(n − 1)), and every
// site sums the decoded contributions in rank order and divides by n, so every site holds the same
// bits, as after the ring. dts' gradient / window-displacement average takes this path with
// --exchange direct or any --compression.
//
// Contributions travel dense (float32: the mean is exact up to the rank-order float sum, and nothing is
// held back) or compressed (fp16, or top-k with error feedback): each site compresses input + its
// residual (gossip/error_feedback.h); the mean is the exact mean of what was sent, and what compression
// cut stays in each sender's residual and goes out with its next contribution.
//
// Cost against the ring: each site sends n − 1 copies of its contribution instead of 2(n − 1)/n, for
// one crossing instead of 2(n − 1) in a row. Under WAN latency with a handful of sites that is the
// better trade; for many sites on thin links the ring is. With a site bound, a dense mixer takes the
// ring (the exact mixer) for the steps whose announced view has more members than the bound: every
// site sees the same view for a step, so all take the same path.
//
// RoundTag::kMix goes direct, and so does the exact re-average (kReaverage, periodic or after a view
// change), always dense, without error feedback, whatever the wire: replicas and residual-free
// parameters meet exactly, and a re-average, which stalls the trainer, takes one crossing instead of the
// ring's 2(n − 1). Other tags go to the exact mixer given to the constructor.
//
// Rounds and faults as AverageMixer: a round not complete by its deadline, or whose missing member a
// newer announced view leaves out, is abandoned (counted), the input and the residual restored, and
// redone in the newer view membership announces. When none comes (nobody was found dead), it is redone
// in the same view under a fresh attempt (gossip/same_view_redo.h), at most SameViewRedo::kMaxAttempts
// times: every member sends its contribution again, and this site, which keeps the contributions it
// had summed (in rank order, so with the same bits as a site that completed the round), waits only for
// those that never arrived. A member that completed the round hands over its result when this site
// asks (after an abandon, and at once when a peer whose contribution is missing has moved past the
// step); this site answers such requests for the last round it completed while it waits in later
// rounds and when it starts one. Only when neither comes does it keep its own values for the step.
// Incoming shares are decoded and validated (length, indices, finite values); a bad one is dropped and
// counted in rejected(), and the round then waits for a valid one until its deadline.
#pragma once

#include <atomic>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <vector>

#include "gossip/error_feedback.h"
#include "gossip/inbox.h"
#include "gossip/mixer.h"
#include "gossip/redo_view.h"
#include "gossip/same_view_redo.h"

namespace meridian::gossip {

// Thread-safety: none (communication thread only), except the counters. Does not own the inbox or
// the exact mixer, which must outlive it.
class DirectMeanMixer final : public Mixer {
 public:
  // `spec` kDense sends float32 contributions; fp16 and top-k compress them with error feedback.
  // `max_sites` (dense only): steps whose announced view has more members go to `exact`.
  DirectMeanMixer(Inbox& inbox, Mixer& exact, CompressionSpec spec, RoundTimeouts timeouts = {},
                  std::size_t max_sites = std::numeric_limits<std::size_t>::max());

  // kMix (and kReaverage when dense): replaces `data` by the mean of the members' contributions. Other
  // tags: the exact mixer's mix. Throws MixError like AverageMixer.
  MixReport mix(std::uint64_t step, RoundTag tag, std::span<float> data, double& weight) override;

  std::uint64_t abandoned() const { return abandoned_.load(); }
  // What compression has cut and not sent yet (this site's error-feedback residual; empty when dense).
  // Communication thread only, or after it stopped.
  std::span<const float> residual() const { return feedback_.residual(); }
  std::uint64_t rejected() const { return rejected_.load(); }

 private:
  // A peer's contribution of n values if `msg` is a valid one (length, indices, finite values): a dense
  // payload as it is, a compressed one decoded into decoded_. nullopt for a bad one.
  std::optional<std::span<const float>> accept(const peer::Message& msg, std::size_t n);

  Inbox& inbox_;
  Mixer& exact_;
  ErrorFeedback feedback_;
  RoundTimeouts timeouts_;
  std::size_t max_sites_;
  RedoView redo_;
  SameViewRedo same_view_;
  std::vector<float> input_;     // (n) the caller's data, to redo an abandoned round; dense: what is sent
  std::vector<float> residual_;  // (n) compressed: the residual before this round, likewise
  std::vector<float> packed_;    // compressed: this site's packed contribution
  std::vector<float> own_;       // (n) compressed: this site's decoded contribution
  std::vector<float> decoded_;   // (n) compressed: a peer's decoded contribution
  std::atomic<std::uint64_t> abandoned_{0};
  std::atomic<std::uint64_t> rejected_{0};
};

}  // namespace meridian::gossip
