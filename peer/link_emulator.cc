#include "peer/link_emulator.h"

#include <algorithm>

namespace meridian::peer {

LinkEmulator::LinkEmulator(std::uint64_t seed) : rng_(seed) {}

std::optional<LinkEmulator::Clock::time_point> LinkEmulator::schedule(const std::string& to, const LinkSpec& link,
                                                                      std::size_t bytes, Clock::time_point now) {
  ++scheduled_;
  LinkState& state = links_[to];

  Clock::time_point departure = std::max(now, state.free_at);
  if (link.bandwidth_bits_per_s > 0) {
    const std::chrono::duration<double> serialization(static_cast<double>(bytes) * 8.0 / link.bandwidth_bits_per_s);
    departure += std::chrono::round<Clock::duration>(serialization);
  }
  state.free_at = departure;

  // Draw loss before jitter only when each is configured, so adding one knob to a link does not
  // change the other's random sequence.
  if (link.loss > 0 && std::uniform_real_distribution<double>(0.0, 1.0)(rng_) < link.loss) {
    ++lost_;
    return std::nullopt;
  }

  Clock::duration delay = link.latency;
  if (link.jitter.count() > 0) {
    const auto j = std::chrono::duration_cast<Clock::duration>(link.jitter).count();
    delay += Clock::duration(std::uniform_int_distribution<Clock::rep>(-j, j)(rng_));
    // Propagation cannot be negative, whatever jitter exceeds latency.
    delay = std::max(delay, Clock::duration::zero());
  }
  // FIFO per link: a message that drew a smaller delay waits for the one ahead of it.
  const Clock::time_point delivery = std::max(departure + delay, state.last_delivery);
  state.last_delivery = delivery;
  return delivery;
}

void LinkEmulator::forget(const std::string& to) {
  const auto it = links_.find(to);
  if (it != links_.end()) links_.erase(it);
}

}  // namespace meridian::peer
