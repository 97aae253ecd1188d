// Optimizers over a model's contiguous parameter buffer: SGD, heavy-ball momentum, Nesterov momentum
// (each with L2 weight decay), Adam (L2 weight decay) and AdamW (decoupled weight decay), following
// torch.optim's update rules (elementwise_math.h). AdamW is torch.optim.AdamW: w ← (1 − γ·λ)·w, then
// Adam's bias-corrected step with no decay in the gradient.
// The learning rate of each step comes from the schedule at the optimizer's step counter.
//
// State lives in one contiguous buffer exposed as a span: for momentum/Nesterov it is the buffer u of
// docs/algorithms.md (u ← m·u + g, w ← w − γ·u), which DTS compensation reads and corrects; for Adam it is
// the first moments followed by the second moments (AdamW likewise). Checkpoints save state() and step_count().
// The state is allocated from the backend, so on the CUDA backend it is device memory like the
// parameters it updates: the spans of step() and state() are backend memory (see models/model.h), and
// read_state()/write_state() copy it to and from the host.
//
// Not thread-safe: the trainer thread owns it.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "models/backend.h"
#include "models/backend_buffer.h"
#include "models/lr_schedule.h"
#include "models/worker_pool.h"

namespace meridian::models {

enum class OptimizerKind { sgd, momentum, nesterov, adam, adamw };

struct OptimizerConfig {
  OptimizerKind kind = OptimizerKind::sgd;
  float momentum = 0.9f;      // momentum/nesterov: m
  float weight_decay = 0.0f;  // λ: L2 coefficient added to the gradient; adamw: decoupled decay rate
  float beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f;  // adam, adamw
};

class Optimizer {
 public:
  // `parameters` is the number of floats updated. Throws error::UserError for a momentum outside
  // [0, 1) or Adam betas outside [0, 1).
  Optimizer(const OptimizerConfig& config, const ScheduleConfig& schedule, std::size_t parameters,
            std::shared_ptr<Backend> backend);

  // One update w ← update(w, g) with γ = learning_rate(); then advances the step counter. With a
  // pool, each of its threads updates one slice of the buffer (the rules are element-wise, so the
  // result is identical). Throws error::InternalError when the spans' sizes differ from the optimizer's.
  void step(std::span<float> parameters, std::span<const float> gradients, WorkerPool* pool = nullptr);

  // γ of the next step() (the schedule at step_count()).
  float learning_rate() const { return schedule_.at(steps_); }
  const LearningRateSchedule& schedule() const { return schedule_; }
  // The momentum coefficient m (0 for SGD and Adam).
  float momentum() const;
  const OptimizerConfig& config() const { return config_; }

  // The heavy-ball/Nesterov buffer u (empty for SGD; the first moments for Adam and AdamW).
  std::span<float> momentum_buffer();
  // All optimizer state, contiguous (u; or Adam's and AdamW's m then v; empty for SGD), in backend memory.
  std::span<float> state() { return state_.span(); }
  std::span<const float> state() const { return state_.span(); }
  // host (state().size()) ← state, and the reverse. Throws error::InternalError for another size.
  void read_state(std::span<float> host) const;
  void write_state(std::span<const float> host);
  std::uint64_t step_count() const { return steps_; }
  // Restores the step counter (checkpoint resume).
  void set_step_count(std::uint64_t steps) { steps_ = steps; }

 private:
  OptimizerConfig config_;
  LearningRateSchedule schedule_;
  std::size_t size_;
  std::shared_ptr<Backend> backend_;
  // Applies the update to elements [begin, end) with rate lr (Adam corrections for this step).
  void update(std::size_t begin, std::size_t end, float* w, const float* g, float lr, float correction1,
              float correction2);

  BackendBuffer<float> state_;
  std::uint64_t steps_ = 0;
};

// "sgd", "momentum", "nesterov", "adam" or "adamw"; throws error::UserError otherwise.
OptimizerKind parse_optimizer_kind(const std::string& name);

}  // namespace meridian::models
