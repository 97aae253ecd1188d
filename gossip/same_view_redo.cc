#include "gossip/same_view_redo.h"

#include <algorithm>
#include <cmath>

namespace meridian::gossip {

namespace {
bool in_group(const std::vector<std::string>& group, const std::string& name) {
  return std::find(group.begin(), group.end(), name) != group.end();
}
}  // namespace

void SameViewRedo::hold(const Round& round, const std::vector<std::string>& group, std::span<const float> result) {
  if (!held_) held_.emplace();
  held_->round = round;
  held_->group = group;
  held_->result.assign(result.begin(), result.end());
}

void SameViewRedo::serve() {
  if (!held_) return;
  const Held& h = *held_;
  auto requests = inbox_.take_all([&](const peer::Message& m) {
    return m.kind == kind_ && m.phase == kRequestPhase && m.round == h.round.step &&
           base_tag(m.tag) == h.round.tag && in_group(h.group, m.from);
  });
  peer::Transport& transport = inbox_.transport();
  for (auto& request : requests) {
    peer::Message msg;
    msg.kind = kind_;
    msg.view_id = h.round.view_id;
    msg.round = h.round.step;
    // The asker's attempt: every answer has its own replay identity, so a second asking is answered too.
    msg.tag = attempt_tag(h.round.tag, attempt_of(request.tag));
    msg.phase = kResultPhase;
    msg.total = h.result.size();
    msg.payload = transport.take_buffer(h.result.size());
    std::copy(h.result.begin(), h.result.end(), msg.payload.begin());
    transport.send(request.from, std::move(msg));
    transport.recycle(std::move(request.payload));
  }
}

void SameViewRedo::ask(const std::vector<std::string>& group, const Round& round, std::uint32_t attempt,
                       std::size_t elements) {
  peer::Transport& transport = inbox_.transport();
  for (const auto& member : group) {
    if (member == transport.self()) continue;
    peer::Message msg;
    msg.kind = kind_;
    msg.view_id = round.view_id;
    msg.round = round.step;
    msg.tag = attempt_tag(round.tag, attempt);
    msg.phase = kRequestPhase;
    msg.total = elements;
    // One float: the request says which round, not what; a payload keeps it an ordinary mixer message.
    msg.payload = transport.take_buffer(1);
    msg.payload[0] = 0.0f;
    transport.send(member, std::move(msg));
  }
}

bool SameViewRedo::is_result(const peer::Message& m, std::uint64_t step, std::uint32_t base,
                             const std::vector<std::uint64_t>& views, const std::vector<std::string>& group) const {
  return m.kind == kind_ && m.phase == kResultPhase && m.round == step && base_tag(m.tag) == base &&
         std::find(views.begin(), views.end(), m.view_id) != views.end() && in_group(group, m.from);
}

bool SameViewRedo::has_result(std::uint64_t step, std::uint32_t base, const std::vector<std::uint64_t>& views,
                              const std::vector<std::string>& group) {
  bool here = false;
  (void)inbox_.take(
      [&](const peer::Message& m) {
        here = here || is_result(m, step, base, views, group);
        return false;
      },
      Clock::now());
  return here;
}

std::optional<std::uint64_t> SameViewRedo::take_result(std::uint64_t step, std::uint32_t base,
                                                       const std::vector<std::uint64_t>& views,
                                                       const std::vector<std::string>& group, std::span<float> data,
                                                       Clock::time_point deadline) {
  for (;;) {
    auto msg = inbox_.take([&](const peer::Message& m) { return is_result(m, step, base, views, group); }, deadline);
    if (!msg) return std::nullopt;
    const bool valid = msg->payload.size() == data.size() && msg->total == data.size() &&
                       std::all_of(msg->payload.begin(), msg->payload.end(), [](float v) { return std::isfinite(v); });
    if (valid) std::copy(msg->payload.begin(), msg->payload.end(), data.begin());
    const std::uint64_t view_id = msg->view_id;
    inbox_.transport().recycle(std::move(msg->payload));
    if (valid) return view_id;
  }
}

std::uint32_t SameViewRedo::highest_attempt(const Round& round, const std::vector<std::string>& group) {
  std::uint32_t highest = 0;
  (void)inbox_.take(
      [&](const peer::Message& m) {
        if (m.kind == kind_ && m.view_id == round.view_id && m.round == round.step && base_tag(m.tag) == round.tag &&
            m.phase != kResultPhase && in_group(group, m.from))
          highest = std::max(highest, attempt_of(m.tag));
        return false;
      },
      Clock::now());
  return highest;
}

}  // namespace meridian::gossip
