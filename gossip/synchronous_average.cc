#include "gossip/synchronous_average.h"

#include <algorithm>

namespace meridian::gossip {

MixReport average_now(MixChannel& channel, std::uint64_t step, std::span<float> grad, std::chrono::milliseconds timeout,
                      RoundTag tag) {
  MixJob job{step, tag, channel.buffer(), 1.0};
  job.data.assign(grad.begin(), grad.end());
  channel.submit(std::move(job), timeout);
  MixResult result = channel.wait(step, tag, timeout);
  std::copy(result.data.begin(), result.data.end(), grad.begin());
  MixReport report = result.report;
  channel.recycle(std::move(result.data));
  return report;
}

}  // namespace meridian::gossip
