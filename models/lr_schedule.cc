#include "models/lr_schedule.h"

#include <cmath>
#include <numbers>
#include <stdexcept>

#include "error/error.h"

namespace meridian::models {

LearningRateSchedule::LearningRateSchedule(const ScheduleConfig& config) : config_(config) {
  if (!(config.base_lr > 0.0f)) throw error::UserError("learning rate must be > 0");
  if (config.step_size == 0) throw error::UserError("step schedule: step size must be >= 1");
  if (config.total_steps == 0) throw error::UserError("cosine schedule: total steps must be >= 1");
}

float LearningRateSchedule::at(std::uint64_t step) const {
  const ScheduleConfig& c = config_;
  if (step < c.warmup_steps) return c.base_lr * static_cast<float>(step + 1) / static_cast<float>(c.warmup_steps);
  const std::uint64_t k = step - c.warmup_steps;
  switch (c.kind) {
    case ScheduleKind::constant: return c.base_lr;
    case ScheduleKind::step: return c.base_lr * std::pow(c.gamma, static_cast<float>(k / c.step_size));
    case ScheduleKind::cosine: {
      // Decay over the steps left after warm-up; past the end the rate stays at min_lr.
      const std::uint64_t span = c.total_steps > c.warmup_steps ? c.total_steps - c.warmup_steps : 1;
      const double progress = std::min(1.0, static_cast<double>(k) / static_cast<double>(span));
      return c.min_lr +
             (c.base_lr - c.min_lr) * static_cast<float>(0.5 * (1.0 + std::cos(std::numbers::pi * progress)));
    }
  }
  return c.base_lr;
}

ScheduleKind parse_schedule_kind(const std::string& name) {
  if (name == "constant") return ScheduleKind::constant;
  if (name == "step") return ScheduleKind::step;
  if (name == "cosine") return ScheduleKind::cosine;
  throw error::UserError("unknown schedule '" + name + "' (expected constant, step or cosine)");
}

}  // namespace meridian::models
