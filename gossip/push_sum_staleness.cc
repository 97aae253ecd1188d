#include "gossip/push_sum_staleness.h"

#include <algorithm>

namespace meridian::gossip {

void OutstandingShares::expect(std::uint64_t step, const peer::View& view, std::vector<std::string> senders) {
  if (senders.empty()) {
    steps_.erase(step);
    return;
  }
  steps_[step] = Step{view, std::move(senders)};
}

bool OutstandingShares::arrived(std::uint64_t step, const std::string& from) {
  auto it = steps_.find(step);
  if (it == steps_.end()) return false;
  auto& senders = it->second.senders;
  auto sender = std::find(senders.begin(), senders.end(), from);
  if (sender == senders.end()) return false;
  senders.erase(sender);
  if (senders.empty()) steps_.erase(it);
  return true;
}

std::optional<OutstandingShares::Due> OutstandingShares::oldest_through(std::uint64_t through) const {
  if (steps_.empty() || steps_.begin()->first > through) return std::nullopt;
  const auto& [step, entry] = *steps_.begin();
  return Due{step, entry.senders.front(), &entry.view};
}

std::size_t OutstandingShares::size() const {
  std::size_t total = 0;
  for (const auto& [step, entry] : steps_) total += entry.senders.size();
  return total;
}

}  // namespace meridian::gossip
