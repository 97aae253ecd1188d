#include "models/optimizer.h"

#include <cmath>
#include <stdexcept>
#include <utility>

#include "error/error.h"

namespace meridian::models {

Optimizer::Optimizer(const OptimizerConfig& config, const ScheduleConfig& schedule, std::size_t parameters,
                     std::shared_ptr<Backend> backend)
    : config_(config), schedule_(schedule), size_(parameters), backend_(std::move(backend)) {
  if (!backend_) throw error::InternalError("optimizer: no backend");
  if (config.momentum < 0.0f || config.momentum >= 1.0f)
    throw error::UserError("optimizer: momentum must be in [0, 1), got " + std::to_string(config.momentum));
  if (config.beta1 < 0.0f || config.beta1 >= 1.0f || config.beta2 < 0.0f || config.beta2 >= 1.0f)
    throw error::UserError("optimizer: Adam betas must be in [0, 1)");
  if (config.weight_decay < 0.0f) throw error::UserError("optimizer: weight decay must be >= 0");
  switch (config.kind) {
    case OptimizerKind::sgd: break;
    case OptimizerKind::momentum:
    case OptimizerKind::nesterov: state_ = BackendBuffer<float>(*backend_, size_); break;
    case OptimizerKind::adam:
    case OptimizerKind::adamw: state_ = BackendBuffer<float>(*backend_, 2 * size_); break;
  }
}

float Optimizer::momentum() const {
  return config_.kind == OptimizerKind::momentum || config_.kind == OptimizerKind::nesterov ? config_.momentum : 0.0f;
}

std::span<float> Optimizer::momentum_buffer() {
  return config_.kind == OptimizerKind::sgd ? std::span<float>() : state_.span().subspan(0, size_);
}

void Optimizer::read_state(std::span<float> host) const {
  if (host.size() != state_.size())
    throw error::InternalError("optimizer: reading " + std::to_string(state_.size()) + " state values into room for " +
                               std::to_string(host.size()));
  backend_->copy_to_host(host.data(), state_.data(), host.size_bytes());
}

void Optimizer::write_state(std::span<const float> host) {
  if (host.size() != state_.size())
    throw error::InternalError("optimizer: writing " + std::to_string(host.size()) + " values into " +
                               std::to_string(state_.size()) + " state values");
  backend_->copy_from_host(state_.data(), host.data(), host.size_bytes());
}

void Optimizer::step(std::span<float> parameters, std::span<const float> gradients, WorkerPool* pool) {
  if (parameters.size() != size_ || gradients.size() != size_)
    throw error::InternalError("optimizer: built for " + std::to_string(size_) + " parameters, got " +
                               std::to_string(parameters.size()) + " parameters and " +
                               std::to_string(gradients.size()) + " gradients");
  const float lr = learning_rate();
  float correction1 = 1.0f, correction2 = 1.0f;
  if (config_.kind == OptimizerKind::adam || config_.kind == OptimizerKind::adamw) {
    const double t = static_cast<double>(steps_ + 1);
    correction1 = static_cast<float>(1.0 - std::pow(static_cast<double>(config_.beta1), t));
    correction2 = static_cast<float>(1.0 - std::pow(static_cast<double>(config_.beta2), t));
  }
  float* w = parameters.data();
  const float* g = gradients.data();
  if (pool == nullptr || pool->size() == 1) {
    update(0, size_, w, g, lr, correction1, correction2);
  } else {
    const std::size_t slices = pool->size();
    pool->run([&](std::size_t i) {
      update(size_ * i / slices, size_ * (i + 1) / slices, w, g, lr, correction1, correction2);
    });
  }
  ++steps_;
}

void Optimizer::update(std::size_t begin, std::size_t end, float* w, const float* g, float lr, float correction1,
                       float correction2) {
  const std::size_t n = end - begin;
  w += begin;
  g += begin;
  switch (config_.kind) {
    case OptimizerKind::sgd: backend_->sgd_update(n, w, g, lr, config_.weight_decay); break;
    case OptimizerKind::momentum:
    case OptimizerKind::nesterov:
      backend_->momentum_update(n, w, state_.data() + begin, g, lr, config_.momentum, config_.weight_decay,
                                config_.kind == OptimizerKind::nesterov);
      break;
    case OptimizerKind::adam:
      backend_->adam_update(n, w, state_.data() + begin, state_.data() + size_ + begin, g, lr, config_.beta1,
                            config_.beta2, config_.eps, config_.weight_decay, correction1, correction2);
      break;
    case OptimizerKind::adamw:
      // torch.optim.AdamW decays the weights before the moments see the gradient, and the gradient
      // carries no decay term. The decay is a plain scale, which the backend's x ← s·x does on either
      // backend, so AdamW needs no kernel of its own.
      if (config_.weight_decay != 0.0f) backend_->push_sum_scale(n, w, 1.0f - lr * config_.weight_decay);
      backend_->adam_update(n, w, state_.data() + begin, state_.data() + size_ + begin, g, lr, config_.beta1,
                            config_.beta2, config_.eps, 0.0f, correction1, correction2);
      break;
  }
}

OptimizerKind parse_optimizer_kind(const std::string& name) {
  if (name == "sgd") return OptimizerKind::sgd;
  if (name == "momentum") return OptimizerKind::momentum;
  if (name == "nesterov") return OptimizerKind::nesterov;
  if (name == "adam") return OptimizerKind::adam;
  if (name == "adamw") return OptimizerKind::adamw;
  throw error::UserError("unknown optimizer '" + name + "' (expected sgd, momentum, nesterov, adam or adamw)");
}

}  // namespace meridian::models
