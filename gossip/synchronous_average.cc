#include "gossip/synchronous_average.h"

#include <algorithm>

namespace meridian::gossip {

MixReport average_now(MixChannel& channel, std::uint64_t step, std::span<float> grad, std::chrono::milliseconds timeout,
                      RoundTag tag) {
  return average_now(channel, step, grad, {}, timeout, tag);
}

MixReport average_now(MixChannel& channel, std::uint64_t step, std::span<float> head, std::span<float> tail,
                      std::chrono::milliseconds timeout, RoundTag tag) {
  MixJob job{step, tag, channel.buffer(), 1.0};
  job.data.assign(head.begin(), head.end());
  job.data.insert(job.data.end(), tail.begin(), tail.end());
  channel.submit(std::move(job), timeout);
  MixResult result = channel.wait(step, tag, timeout);
  const auto split = result.data.begin() + static_cast<std::ptrdiff_t>(head.size());
  std::copy(result.data.begin(), split, head.begin());
  std::copy(split, result.data.end(), tail.begin());
  MixReport report = result.report;
  channel.recycle(std::move(result.data));
  return report;
}

}  // namespace meridian::gossip
