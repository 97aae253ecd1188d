#include "gossip/ring_allreduce.h"

#include <algorithm>
#include <stdexcept>

namespace meridian::gossip {

Segment segment_of(std::size_t total, std::size_t parts, std::size_t index) {
  std::size_t base = total / parts;
  std::size_t extra = total % parts;
  return Segment{index * base + std::min(index, extra), base + (index < extra ? 1 : 0)};
}

std::vector<float> RingAllReduce::buffer() {
  if (pool_.empty()) return {};
  std::vector<float> buf = std::move(pool_.back());
  pool_.pop_back();
  return buf;
}

void RingAllReduce::recycle(std::vector<float> buf) {
  if (buf.capacity() > 0) pool_.push_back(std::move(buf));
}

RoundStatus RingAllReduce::run(const std::vector<std::string>& group, const Round& round,
                               std::span<float> data, Clock::time_point deadline,
                               const RingOptions& options) {
  const std::string& self = inbox_.transport().self();
  auto me = std::find(group.begin(), group.end(), self);
  if (me == group.end()) throw std::invalid_argument("ring all-reduce: site '" + self + "' is not in the group");
  const std::size_t n = group.size();
  const std::size_t r = static_cast<std::size_t>(me - group.begin());
  if (n == 1 || data.empty()) return RoundStatus::kCompleted;
  const std::string& next = group[(r + 1) % n];
  const std::string& prev = group[(r + n - 1) % n];
  const std::size_t piece = std::max<std::size_t>(1, options.max_piece);
  const float scale = 1.0f / static_cast<float>(n);

  auto send = [&](std::uint32_t phase, std::size_t offset, std::vector<float> payload) {
    peer::Message msg;
    msg.kind = options.kind;
    msg.view_id = round.view_id;
    msg.round = round.step;
    msg.tag = round.tag;
    msg.phase = phase;
    msg.offset = offset;
    msg.total = data.size();
    msg.payload = std::move(payload);
    inbox_.transport().send(next, std::move(msg));
  };
  // Waits for piece [offset, offset + len) of ring phase `phase` from the previous member.
  auto receive = [&](std::uint32_t phase, std::size_t offset, std::size_t len) -> std::optional<std::vector<float>> {
    for (;;) {
      const auto until = options.give_up ? std::min(deadline, Clock::now() + std::chrono::milliseconds(100)) : deadline;
      auto msg = inbox_.take(
          [&](const peer::Message& m) {
            return m.kind == options.kind && m.from == prev && m.view_id == round.view_id &&
                   m.round == round.step && m.tag == round.tag && m.phase == phase && m.offset == offset;
          },
          until);
      if (!msg && until < deadline && !options.give_up()) continue;
      if (!msg) return std::nullopt;
      if (msg->payload.size() == len && msg->total == data.size()) return std::move(msg->payload);
      ++rejected_;  // a malformed piece never touches the data; the round then runs into its deadline
    }
  };

  // Reduce-scatter, first send: this member's own copy of its segment r starts that segment's sum.
  {
    Segment s = segment_of(data.size(), n, r);
    for (std::size_t off = 0; off < s.size; off += piece) {
      std::size_t len = std::min(piece, s.size - off);
      std::vector<float> buf = buffer();
      buf.assign(data.begin() + s.begin + off, data.begin() + s.begin + off + len);
      send(0, s.begin + off, std::move(buf));
    }
  }
  const auto last = static_cast<std::uint32_t>(n - 2);
  for (std::uint32_t t = 0; t <= last; ++t) {
    Segment s = segment_of(data.size(), n, (r + 2 * n - t - 1) % n);
    for (std::size_t off = 0; off < s.size; off += piece) {
      std::size_t len = std::min(piece, s.size - off);
      auto acc = receive(t, s.begin + off, len);
      if (!acc) return RoundStatus::kAbandoned;
      float* own = data.data() + s.begin + off;
      float* sum = acc->data();
      if (t < last) {
        for (std::size_t i = 0; i < len; ++i) sum[i] += own[i];
        send(t + 1, s.begin + off, std::move(*acc));
      } else {
        // This member finishes segment r + 1: scale once here so every copy carries the same bits.
        // One pass adds, scales and stores the result in both places (the data and the message).
        if (options.average) {
          for (std::size_t i = 0; i < len; ++i) own[i] = sum[i] = (sum[i] + own[i]) * scale;
        } else {
          for (std::size_t i = 0; i < len; ++i) own[i] = sum[i] = sum[i] + own[i];
        }
        send(last + 1, s.begin + off, std::move(*acc));
      }
    }
  }
  // All-gather: phase n-1+t brings segment r - t, finished elsewhere; pass it on unless the next
  // member is the one that finished it.
  for (std::uint32_t t = 0; t <= last; ++t) {
    Segment s = segment_of(data.size(), n, (r + n - t) % n);
    for (std::size_t off = 0; off < s.size; off += piece) {
      std::size_t len = std::min(piece, s.size - off);
      auto got = receive(last + 1 + t, s.begin + off, len);
      if (!got) return RoundStatus::kAbandoned;
      std::copy(got->begin(), got->end(), data.begin() + s.begin + off);
      if (t < last)
        send(last + 2 + t, s.begin + off, std::move(*got));
      else
        recycle(std::move(*got));
    }
  }
  return RoundStatus::kCompleted;
}

}  // namespace meridian::gossip
