#include "gossip/diloco.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "error/error.h"
#include "gossip/synchronous_average.h"

namespace meridian::gossip {

std::string diloco_wire_name(const CompressionSpec& wire) {
  switch (wire.encoding) {
    case Encoding::kDense: return "fp32";
    case Encoding::kFp16: return "fp16";
    case Encoding::kInt8: return "int8";
    case Encoding::kTopK: break;
  }
  return to_string(wire);
}

Diloco::Diloco(DilocoConfig config, MixChannel& channel, std::span<float> params, std::span<float> stats)
    : config_(config),
      channel_(channel),
      params_(params),
      stats_(stats),
      fragments_(params.size(), config.inner_steps, config.fragments),
      global_(params.begin(), params.end()),
      momentum_(params.size(), 0.0f) {
  if (!(std::isfinite(config.outer_lr) && config.outer_lr > 0.0))
    throw error::UserError("diloco: the outer learning rate must be positive, got " + std::to_string(config.outer_lr));
  if (!(config.outer_momentum >= 0.0 && config.outer_momentum < 1.0))
    throw error::UserError("diloco: the outer momentum must be in [0, 1), got " +
                           std::to_string(config.outer_momentum));
  if (config.overlap > config.inner_steps)
    throw error::UserError("diloco: overlap τ = " + std::to_string(config.overlap) +
                           " exceeds H = " + std::to_string(config.inner_steps) +
                           " (an exchange must be applied before its fragment syncs again)");
  if (config.wire.encoding == Encoding::kTopK)
    throw error::UserError("diloco: top-k would zero most of each pseudo-gradient; use fp32, fp16 or int8");
  if (config.wire.encoding != Encoding::kDense) feedback_.assign(fragments_.count(), ErrorFeedback(config.wire));
}

void Diloco::after_step(std::uint64_t k) {
  apply_through(k);
  // A re-average made due by an exchange applied above runs before this step's sync starts, so that the
  // sync's Δ is taken from the agreed θ_g, and nothing started now has to be waited for.
  if (reaverage_due_) reaverage(k);
  if (const auto f = fragments_.synced_after(k)) {
    start_sync(k, *f);
    if (config_.overlap == 0) {
      apply_through(k);
      if (reaverage_due_) reaverage(k);
    }
  }
}

void Diloco::start_sync(std::uint64_t k, std::uint32_t f) {
  const std::size_t begin = fragments_.begin(f), len = fragments_.end(f) - begin;
  MixJob job{k, RoundTag::kMix, channel_.buffer(), 1.0};
  job.data.resize(len);
  Exchange exchange{k, f, config_.overlap, {}};
  // τ = 0 is applied at once and needs no snapshot, unless an older exchange with a larger τ (from
  // before set_overlap) is still outstanding: applied in order, this one then waits for it too.
  if (config_.overlap > 0 || !pending_.empty()) {
    exchange.local = channel_.buffer();
    exchange.local.assign(params_.begin() + static_cast<std::ptrdiff_t>(begin),
                          params_.begin() + static_cast<std::ptrdiff_t>(begin + len));
  }
  if (feedback_.empty()) {
    for (std::size_t i = 0; i < len; ++i) job.data[i] = global_[begin + i] - params_[begin + i];
  } else {
    delta_.resize(len);
    for (std::size_t i = 0; i < len; ++i) delta_[i] = global_[begin + i] - params_[begin + i];
    feedback_[f].compress(delta_, packed_, job.data);
  }
  channel_.submit(std::move(job), config_.wait_timeout);
  pending_.push_back(std::move(exchange));
}

void Diloco::apply_through(std::uint64_t last_step) {
  // In order: an exchange is never applied before an earlier one.
  while (!pending_.empty() &&
         (last_step == UINT64_MAX || pending_.front().step + pending_.front().overlap <= last_step)) {
    Exchange& exchange = pending_.front();
    MixResult result = channel_.wait(exchange.step, RoundTag::kMix, config_.wait_timeout);
    apply(exchange, result);
    channel_.recycle(std::move(exchange.local));
    pending_.pop_front();
  }
}

void Diloco::apply(const Exchange& exchange, MixResult& result) {
  note(result.report);
  const std::size_t begin = fragments_.begin(exchange.fragment);
  const std::size_t len = fragments_.end(exchange.fragment) - begin;
  const float lr = static_cast<float>(config_.outer_lr), mu = static_cast<float>(config_.outer_momentum);
  float* g = global_.data() + begin;
  float* m = momentum_.data() + begin;
  float* x = params_.data() + begin;
  const float* mean = result.data.data();
  // A site that sat the exchange out (the others found it dead) got its own Δ back: it takes the outer
  // step on that alone, which is what it would do training by itself until a view takes it back.
  for (std::size_t i = 0; i < len; ++i) {
    m[i] = mu * m[i] + mean[i];
    g[i] -= lr * (mean[i] + mu * m[i]);
  }
  if (exchange.local.empty()) {
    std::copy(g, g + len, x);
  } else {
    // The local progress since the snapshot, x − x_s, is kept on top of the new global parameters.
    for (std::size_t i = 0; i < len; ++i) x[i] = g[i] + (x[i] - exchange.local[i]);
  }
  channel_.recycle(std::move(result.data));
  ++outer_steps_;
}

void Diloco::note(const MixReport& report) {
  abandoned_ += report.abandoned;
  // The first view counts as a change: a site that starts or resumes mid-run is pulled in by the
  // re-average its peers run for the same view change.
  if ((!have_view_ || report.scheduled_view_id != view_id_) && config_.reaverage_after_view_change)
    reaverage_due_ = true;
  have_view_ = true;
  view_id_ = report.scheduled_view_id;
}

void Diloco::reaverage(std::uint64_t k) {
  apply_through(UINT64_MAX);
  const std::size_t n = global_.size();
  std::vector<float> buf = channel_.buffer();
  buf.resize(2 * n);
  std::copy(global_.begin(), global_.end(), buf.begin());
  std::copy(momentum_.begin(), momentum_.end(), buf.begin() + static_cast<std::ptrdiff_t>(n));
  const MixReport report = average_now(channel_, k, buf, stats_, config_.wait_timeout, RoundTag::kReaverage);
  for (std::size_t i = 0; i < n; ++i) {
    // θ keeps its distance from θ_g: the local progress since the last sync rides on the agreed θ_g.
    params_[i] += buf[i] - global_[i];
    global_[i] = buf[i];
    momentum_[i] = buf[n + i];
  }
  channel_.recycle(std::move(buf));
  abandoned_ += report.abandoned;
  have_view_ = true;
  view_id_ = report.scheduled_view_id;
  reaverage_due_ = false;
  ++reaverages_;
}

bool Diloco::touches_parameters(std::uint64_t k) const {
  return reaverage_due_ || fragments_.synced_after(k).has_value() ||
         (!pending_.empty() && pending_.front().step + pending_.front().overlap <= k);
}

void Diloco::set_overlap(std::uint32_t overlap) {
  if (overlap > config_.inner_steps)
    throw error::InternalError("diloco: overlap τ = " + std::to_string(overlap) +
                               " exceeds H = " + std::to_string(config_.inner_steps));
  config_.overlap = overlap;
}

void Diloco::finish() { apply_through(UINT64_MAX); }

}  // namespace meridian::gossip
