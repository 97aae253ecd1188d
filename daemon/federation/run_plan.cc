#include "daemon/federation/run_plan.h"

#include <charconv>
#include <string_view>

namespace meridian::daemon {

std::string encode_plan(const RunPlan& plan) {
  std::string body = "plan steps=" + std::to_string(plan.steps) + " end=" + std::to_string(plan.end_round);
  if (plan.end_round != 0) body += " start=" + std::to_string(plan.start_round);
  return body;
}

std::optional<RunPlan> decode_plan(const std::string& body) {
  // Exactly "plan steps=<digits> end=<digits>[ start=<digits>]"; from_chars takes no sign, so "-1"
  // is refused.
  const std::string_view text(body);
  const std::string_view head = "plan steps=", middle = " end=", tail = " start=";
  if (!text.starts_with(head)) return std::nullopt;
  RunPlan plan;
  const char* p = text.data() + head.size();
  const char* end = text.data() + text.size();
  auto [after_steps, e1] = std::from_chars(p, end, plan.steps);
  if (e1 != std::errc() || after_steps == p) return std::nullopt;
  const std::string_view rest(after_steps, static_cast<std::size_t>(end - after_steps));
  if (!rest.starts_with(middle)) return std::nullopt;
  p = after_steps + middle.size();
  auto [after_end, e2] = std::from_chars(p, end, plan.end_round);
  if (e2 != std::errc() || after_end == p || plan.steps == 0) return std::nullopt;
  if (after_end == end) return plan;
  const std::string_view last(after_end, static_cast<std::size_t>(end - after_end));
  if (!last.starts_with(tail) || plan.end_round == 0) return std::nullopt;
  p = after_end + tail.size();
  auto [after_start, e3] = std::from_chars(p, end, plan.start_round);
  if (e3 != std::errc() || after_start == p || after_start != end || plan.start_round > plan.end_round)
    return std::nullopt;
  return plan;
}

peer::Message plan_message(const RunPlan& plan) {
  peer::Message m;
  m.kind = peer::MessageKind::kControl;
  m.tag = kPlanTag;
  m.body = encode_plan(plan);
  return m;
}

std::optional<RunPlan> PeerPlans::note(const peer::Message& msg) {
  if (msg.kind != peer::MessageKind::kControl || msg.tag != kPlanTag) return std::nullopt;
  auto plan = decode_plan(msg.body);
  if (!plan) return std::nullopt;
  std::lock_guard lock(mu_);
  plans_[msg.from] = *plan;
  return plan;
}

std::map<std::string, RunPlan> PeerPlans::snapshot() const {
  std::lock_guard lock(mu_);
  return plans_;
}

}  // namespace meridian::daemon
