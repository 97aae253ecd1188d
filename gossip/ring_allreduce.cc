#include "gossip/ring_allreduce.h"

#include <algorithm>
#include <optional>
#include <stdexcept>

#include "error/error.h"

namespace meridian::gossip {

Segment segment_of(std::size_t total, std::size_t parts, std::size_t index) {
  std::size_t base = total / parts;
  std::size_t extra = total % parts;
  return Segment{index * base + std::min(index, extra), base + (index < extra ? 1 : 0)};
}

RoundStatus RingAllReduce::run(const std::vector<std::string>& group, const Round& round, std::span<float> data,
                               Clock::time_point deadline, const RingOptions& options) {
  const std::string& self = inbox_.transport().self();
  auto me = std::find(group.begin(), group.end(), self);
  if (me == group.end()) throw error::InternalError("ring all-reduce: site '" + self + "' is not in the group");
  const std::size_t n = group.size();
  const std::size_t r = static_cast<std::size_t>(me - group.begin());
  if (n == 1 || data.empty()) return RoundStatus::kCompleted;
  const std::string& next = group[(r + 1) % n];
  const std::string& prev = group[(r + n - 1) % n];
  const std::size_t piece = std::max<std::size_t>(1, options.max_piece);
  const float scale = 1.0f / static_cast<float>(n);

  peer::Transport& transport = inbox_.transport();
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
    transport.send(next, std::move(msg));
  };
  // Waits for piece [offset, offset + len) of ring phase `phase` from the previous member and has the
  // transport combine its payload into `sink` (out, addend, scale set by the caller) as it reads it,
  // so every received byte is read once, and, unless `relay_phase` is empty, sends the result on to the
  // next member as that phase's piece (straight from the receive buffer where the transport can).
  // False when the deadline passed first.
  auto is_piece = [&](const peer::Message& m, std::uint32_t phase, std::size_t offset) {
    return m.kind == options.kind && m.from == prev && m.view_id == round.view_id && m.round == round.step &&
           m.tag == round.tag && m.phase == phase && m.offset == offset;
  };
  peer::PayloadSink sink;
  auto receive = [&](std::uint32_t phase, std::size_t offset, std::size_t len,
                     std::optional<std::uint32_t> relay_phase) -> bool {
    sink.elements = len;
    sink.match = [&, phase, offset](const peer::Message& m) {
      return is_piece(m, phase, offset) && m.total == data.size();
    };
    sink.relay.reset();
    if (relay_phase) {
      peer::Message header;
      header.kind = options.kind;
      header.view_id = round.view_id;
      header.round = round.step;
      header.tag = round.tag;
      header.phase = *relay_phase;
      header.offset = offset;
      header.total = data.size();
      sink.relay = peer::PayloadSink::Relay{next, std::move(header)};
    }
    auto wanted = [&, phase, offset](const peer::Message& m) { return is_piece(m, phase, offset); };
    for (;;) {
      const auto until = options.give_up ? std::min(deadline, Clock::now() + std::chrono::milliseconds(100)) : deadline;
      auto got = inbox_.take_into(wanted, sink, until);
      if (!got && until < deadline && !options.give_up()) continue;
      if (!got) return false;
      if (got->sunk) return true;
      // A piece of the wrong size (or with non-finite values) is refused before it is combined into
      // anything; the round then runs into its deadline.
      ++rejected_;
      transport.recycle(std::move(got->msg.payload));
    }
  };

  // Reduce-scatter, first send: this member's own copy of its segment r starts that segment's sum.
  {
    Segment s = segment_of(data.size(), n, r);
    for (std::size_t off = 0; off < s.size; off += piece) {
      std::size_t len = std::min(piece, s.size - off);
      std::vector<float> buf = transport.take_buffer(len);
      std::copy(data.begin() + s.begin + off, data.begin() + s.begin + off + len, buf.begin());
      send(0, s.begin + off, std::move(buf));
    }
  }
  const auto last = static_cast<std::uint32_t>(n - 2);
  for (std::uint32_t t = 0; t <= last; ++t) {
    Segment s = segment_of(data.size(), n, (r + 2 * n - t - 1) % n);
    for (std::size_t off = 0; off < s.size; off += piece) {
      std::size_t len = std::min(piece, s.size - off);
      std::span<float> own = data.subspan(s.begin + off, len);
      sink.addend = own;
      if (t < last) {
        // The partial sum goes on to the next member: received + own, only in the relayed message.
        sink.out = {};
        sink.scale = 1.0f;
      } else {
        // This member finishes segment r + 1: scale once here so every copy carries the same bits.
        // One pass adds, scales and stores the result in both places (the data and the relayed message).
        sink.out = own;
        sink.scale = options.average ? scale : 1.0f;
      }
      if (!receive(t, s.begin + off, len, t + 1)) return RoundStatus::kAbandoned;
    }
  }
  // All-gather: phase n-1+t brings segment r - t, finished elsewhere; pass it on unless the next
  // member is the one that finished it.
  sink.addend = {};
  sink.scale = 1.0f;
  for (std::uint32_t t = 0; t <= last; ++t) {
    Segment s = segment_of(data.size(), n, (r + n - t) % n);
    for (std::size_t off = 0; off < s.size; off += piece) {
      std::size_t len = std::min(piece, s.size - off);
      sink.out = data.subspan(s.begin + off, len);
      std::optional<std::uint32_t> relay_phase;
      if (t < last) relay_phase = last + 2 + t;
      if (!receive(last + 1 + t, s.begin + off, len, relay_phase)) return RoundStatus::kAbandoned;
    }
  }
  return RoundStatus::kCompleted;
}

}  // namespace meridian::gossip
