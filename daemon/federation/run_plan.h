// How the sites of a run agree on its rounds, so that every site ends at the same round even when
// their own data files give them different numbers of steps (no site waits for rounds the others will
// never start).
//
// Each site's plan travels as a peer::MessageKind::kControl message (tag kPlanTag, body below) to the
// members of its view: how many steps its own data gives it and, once it trains, the run's last
// round. A federation that starts together ends at start + the smallest site's step count; a site
// that joins a running federation takes the last round from a peer that already trains; a site that
// resumes keeps the rounds of its checkpoint.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "peer/message.h"

namespace meridian::daemon {

inline constexpr std::uint32_t kPlanTag = 0x706c616e;  // "plan"

struct RunPlan {
  std::uint64_t steps = 0;      // steps this site's data gives it
  std::uint64_t end_round = 0;  // the run's last round + 1 once this site trains; 0 before
  // The run's first round once this site trains (with end_round), so that a site joining a running
  // federation counts its rounds as the others do; 0 before.
  std::uint64_t start_round = 0;
  friend bool operator==(const RunPlan&, const RunPlan&) = default;
};

// "plan steps=S end=E", with " start=B" appended once E is set; decode returns nullopt for anything
// else (never throws).
std::string encode_plan(const RunPlan& plan);
std::optional<RunPlan> decode_plan(const std::string& body);

// A kControl message carrying `plan`.
peer::Message plan_message(const RunPlan& plan);

// The plans heard from peers, newest per site. Thread-safety: every method may be called from any thread.
class PeerPlans {
 public:
  // Records the plan in `msg` (a kControl message with kPlanTag). Returns it, or nullopt when `msg`
  // is not a well-formed plan.
  std::optional<RunPlan> note(const peer::Message& msg);
  std::map<std::string, RunPlan> snapshot() const;

 private:
  mutable std::mutex mu_;
  std::map<std::string, RunPlan> plans_;
};

}  // namespace meridian::daemon
