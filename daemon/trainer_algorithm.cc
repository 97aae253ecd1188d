#include "daemon/trainer_algorithm.h"

#include <algorithm>

namespace meridian::daemon {

models::ScheduleConfig schedule_of(const SiteSettings& settings, std::uint64_t steps_per_epoch,
                                   std::uint64_t total_steps) {
  models::ScheduleConfig s;
  s.base_lr = static_cast<float>(settings.options.lr);
  s.total_steps = std::max<std::uint64_t>(1, total_steps);
  const auto& spec = settings.schedule;
  switch (spec.kind) {
    case ScheduleSpec::Kind::kConstant: s.kind = models::ScheduleKind::constant; break;
    case ScheduleSpec::Kind::kStep:
      s.kind = models::ScheduleKind::step;
      s.step_size = std::max<std::uint64_t>(1, static_cast<std::uint64_t>(spec.step_epochs) * steps_per_epoch);
      s.gamma = static_cast<float>(spec.step_factor);
      break;
    case ScheduleSpec::Kind::kCosine: s.kind = models::ScheduleKind::cosine; break;
  }
  return s;
}

}  // namespace meridian::daemon
