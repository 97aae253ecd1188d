// The trainer side of allreduce (synchronous SGP's baseline): every step the local gradient is
// replaced by the exact mean over the view before the optimizer sees it, so every site applies the
// same update and the replicas stay bit-identical.
#pragma once

#include <chrono>
#include <cstdint>
#include <span>

#include "gossip/mix_channel.h"

namespace meridian::gossip {

// Replaces `grad` by its mean over the view in force for `step`, waiting for the communication thread.
// Returns the mix report. Throws what MixChannel::wait throws.
MixReport average_now(MixChannel& channel, std::uint64_t step, std::span<float> grad, std::chrono::milliseconds timeout,
                      RoundTag tag = RoundTag::kMix);

// The same for `head` and `tail` averaged as one tensor, head's elements first (the parameters or
// the gradient, then the model's normalization statistics). With an empty tail it is the call above.
MixReport average_now(MixChannel& channel, std::uint64_t step, std::span<float> head, std::span<float> tail,
                      std::chrono::milliseconds timeout, RoundTag tag = RoundTag::kMix);

}  // namespace meridian::gossip
