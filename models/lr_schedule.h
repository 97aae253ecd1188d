// Learning-rate schedules: constant, step decay, cosine annealing, each optionally preceded by a
// linear warm-up. Pure functions of the step, so every site computes the same γ(k) and the gossip
// layer can ask for the rate of a past step (DTS corrections use γ of the corrected step).
#pragma once

#include <cstdint>
#include <string>

namespace meridian::models {

enum class ScheduleKind { constant, step, cosine };

struct ScheduleConfig {
  ScheduleKind kind = ScheduleKind::constant;
  float base_lr = 0.01f;
  std::uint64_t warmup_steps = 0;  // linear ramp from base_lr/warmup_steps up to base_lr
  std::uint64_t step_size = 1;     // step: multiply by gamma every step_size steps (after warm-up)
  float gamma = 0.1f;
  std::uint64_t total_steps = 1;  // cosine: decays from base_lr to min_lr over total_steps (incl. warm-up)
  float min_lr = 0.0f;
};

class LearningRateSchedule {
 public:
  // Throws error::UserError for a non-positive base rate, step_size 0 or total_steps 0.
  explicit LearningRateSchedule(const ScheduleConfig& config);
  // γ for the 0-based step k.
  float at(std::uint64_t step) const;
  const ScheduleConfig& config() const { return config_; }

 private:
  ScheduleConfig config_;
};

// "constant", "step" or "cosine"; throws error::UserError otherwise.
ScheduleKind parse_schedule_kind(const std::string& name);

}  // namespace meridian::models
