#include "gossip/robust_group_mean.h"

#include <algorithm>
#include <stdexcept>

#include "error/error.h"
#include "gossip/robust_combine.h"

namespace meridian::gossip {

RoundStatus RobustGroupMean::run(const std::vector<std::string>& group, const Round& round, std::span<float> data,
                                 Clock::time_point deadline, peer::MessageKind kind) {
  const std::string& self = inbox_.transport().self();
  if (std::find(group.begin(), group.end(), self) == group.end())
    throw error::InternalError("robust group mean: site '" + self + "' is not in the group");
  const auto scale = scale_.on_input(round.tag, data);
  if (group.size() == 1 || data.empty()) {
    scale_.on_output(round.tag, data);
    return RoundStatus::kCompleted;
  }
  for (const auto& member : group) {
    if (member == self) continue;
    peer::Message msg;
    msg.kind = kind;
    msg.view_id = round.view_id;
    msg.round = round.step;
    msg.tag = round.tag;
    msg.phase = kGatherPhase;
    msg.total = data.size();
    msg.payload.assign(data.begin(), data.end());
    inbox_.transport().send(member, std::move(msg));
  }
  gathered_.resize(group.size() - 1);
  std::size_t got = 0;
  for (const auto& member : group) {
    if (member == self) continue;
    for (;;) {
      auto msg = inbox_.take(
          [&](const peer::Message& m) {
            return m.kind == kind && m.from == member && m.view_id == round.view_id && m.round == round.step &&
                   m.tag == round.tag && m.phase == kGatherPhase;
          },
          deadline);
      if (!msg) return RoundStatus::kAbandoned;
      // A vector of the wrong size never takes part; the round then runs into its deadline.
      if (msg->payload.size() != data.size() || msg->offset != 0) continue;
      gathered_[got].swap(msg->payload);
      inbox_.transport().recycle(std::move(msg->payload));
      ++got;
      break;
    }
  }

  const std::size_t g = group.size();
  if (options_.trim > 0 && g > 2 * options_.trim) {
    std::vector<std::span<const float>> all;
    all.reserve(g);
    difference_.assign(data.begin(), data.end());  // own vector, read while `data` is overwritten
    all.emplace_back(difference_);
    for (const auto& v : gathered_) all.emplace_back(v);
    trimmed_mean(all, options_.trim, data, options_.outlier_mads);
  } else {
    // own + (1/g)·Σ clip(x_j − own): the mean when nobody is clipped.
    // Without an own scale yet (the first mix of this tag) others count as this site's own vector:
    // see PushSumMixer for why that is safe and what it prevents.
    const bool clip = options_.clip_factor > 0;
    const double bound = clip && scale ? options_.clip_factor * *scale : 0.0;
    sum_.assign(data.size(), 0.0);
    for (auto& v : gathered_) {
      difference_.resize(data.size());
      for (std::size_t i = 0; i < data.size(); ++i) difference_[i] = v[i] - data[i];
      if (clip && clip_norm(difference_, bound) < 1.0) ++clipped_;
      for (std::size_t i = 0; i < data.size(); ++i) sum_[i] += difference_[i];
    }
    const double inv = 1.0 / static_cast<double>(g);
    for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<float>(data[i] + sum_[i] * inv);
  }
  scale_.on_output(round.tag, data);
  return RoundStatus::kCompleted;
}

}  // namespace meridian::gossip
