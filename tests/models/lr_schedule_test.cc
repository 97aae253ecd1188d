#include <catch2/catch.hpp>

#include <cmath>

#include "error/error.h"
#include "models/lr_schedule.h"

using namespace meridian::models;

TEST_CASE("constant schedule", "[models][schedule][unit]") {
  ScheduleConfig c;
  c.base_lr = 0.3f;
  LearningRateSchedule s(c);
  CHECK(s.at(0) == 0.3f);
  CHECK(s.at(100000) == 0.3f);
}

TEST_CASE("step schedule decays by gamma every step_size steps", "[models][schedule][unit]") {
  ScheduleConfig c;
  c.kind = ScheduleKind::step;
  c.base_lr = 1.0f;
  c.step_size = 10;
  c.gamma = 0.1f;
  LearningRateSchedule s(c);
  CHECK(s.at(9) == 1.0f);
  CHECK(s.at(10) == Approx(0.1f));
  CHECK(s.at(25) == Approx(0.01f));
}

TEST_CASE("cosine schedule goes from base to min over total_steps", "[models][schedule][unit]") {
  ScheduleConfig c;
  c.kind = ScheduleKind::cosine;
  c.base_lr = 1.0f;
  c.min_lr = 0.1f;
  c.total_steps = 100;
  LearningRateSchedule s(c);
  CHECK(s.at(0) == Approx(1.0f));
  CHECK(s.at(50) == Approx(0.55f));
  CHECK(s.at(25) == Approx(0.1f + 0.9f * 0.5f * (1.0f + std::cos(3.14159265f / 4.0f))));
  CHECK(s.at(100) == Approx(0.1f));
  CHECK(s.at(1000) == Approx(0.1f));
}

TEST_CASE("linear warm-up precedes the schedule", "[models][schedule][unit]") {
  ScheduleConfig c;
  c.kind = ScheduleKind::cosine;
  c.base_lr = 0.8f;
  c.warmup_steps = 4;
  c.total_steps = 14;
  LearningRateSchedule s(c);
  CHECK(s.at(0) == Approx(0.2f));
  CHECK(s.at(3) == Approx(0.8f));
  CHECK(s.at(4) == Approx(0.8f));  // cosine starts at the top after warm-up
  CHECK(s.at(9) == Approx(0.4f));  // half-way through the 10 cosine steps
  ScheduleConfig step = c;
  step.kind = ScheduleKind::step;
  step.step_size = 2;
  step.gamma = 0.5f;
  LearningRateSchedule st(step);
  CHECK(st.at(1) == Approx(0.4f));
  CHECK(st.at(5) == Approx(0.8f));
  CHECK(st.at(6) == Approx(0.4f));
}

TEST_CASE("schedules reject nonsense", "[models][schedule][unit]") {
  ScheduleConfig c;
  c.base_lr = 0.0f;
  CHECK_THROWS_AS(LearningRateSchedule(c), meridian::error::UserError);
  c.base_lr = 0.1f;
  c.step_size = 0;
  CHECK_THROWS_AS(LearningRateSchedule(c), meridian::error::UserError);
  CHECK_THROWS_AS(parse_schedule_kind("linear"), meridian::error::UserError);
}
