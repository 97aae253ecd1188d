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
  if (config.outer_average == OuterAverage::kPushSum) {
    if (config.fragments != 1)
      throw error::UserError("diloco-gossip: F = " + std::to_string(config.fragments) +
                             " fragments: push-sum adds a late share to the next mix, which would be another "
                             "fragment's; use F = 1");
    if (config.wire.encoding != Encoding::kDense)
      throw error::UserError(
          "diloco-gossip: the trainer sends dense shares (the push-sum mixer rounds them to "
          "fp16 itself), got wire " +
          diloco_wire_name(config.wire));
    // An exact mean of (θ_g, m) would wait on every site, which is what the push-sum average avoids; the
    // gossip pulls a returning site's θ_g in instead.
    config_.reaverage_after_view_change = false;
  }
  if (config.wire.encoding != Encoding::kDense) feedback_.assign(fragments_.count(), ErrorFeedback(config.wire));
}

void Diloco::set_push_sum_weight(double weight) {
  if (!(std::isfinite(weight) && weight > 0.0))
    throw error::UserError("diloco: the push-sum weight must be finite and positive, got " + std::to_string(weight));
  weight_ = weight;
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
  Exchange exchange{k, f, config_.overlap, {}, {}};
  // τ = 0 is applied at once and needs no snapshot, unless an older exchange with a larger τ (from
  // before set_overlap) is still outstanding: applied in order, this one then waits for it too.
  if (config_.overlap > 0 || !pending_.empty()) {
    exchange.local = channel_.buffer();
    exchange.local.assign(params_.begin() + static_cast<std::ptrdiff_t>(begin),
                          params_.begin() + static_cast<std::ptrdiff_t>(begin + len));
  }
  if (config_.outer_average == OuterAverage::kPushSum) {
    // The outer step on this site's own Δ; its result θ_g' travels as the numerator w·θ_g' of a share.
    delta_.resize(len);
    for (std::size_t i = 0; i < len; ++i) delta_[i] = global_[begin + i] - params_[begin + i];
    outer_step(begin, delta_);
    job.weight = weight_;
    for (std::size_t i = 0; i < len; ++i) job.data[i] = static_cast<float>(weight_ * global_[begin + i]);
  } else if (feedback_.empty()) {
    for (std::size_t i = 0; i < len; ++i) job.data[i] = global_[begin + i] - params_[begin + i];
  } else {
    delta_.resize(len);
    for (std::size_t i = 0; i < len; ++i) delta_[i] = global_[begin + i] - params_[begin + i];
    // Kept until the exchange is applied: a checkpoint taken meanwhile saves this residual (see
    // read_residuals()).
    const auto before = feedback_[f].residual();
    exchange.residual = channel_.buffer();
    exchange.residual.assign(before.begin(), before.end());
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
    channel_.recycle(std::move(exchange.residual));
    pending_.pop_front();
  }
}

void Diloco::apply(const Exchange& exchange, MixResult& result) {
  note(result.report);
  const std::size_t begin = fragments_.begin(exchange.fragment);
  const std::size_t len = fragments_.end(exchange.fragment) - begin;
  float* g = global_.data() + begin;
  float* x = params_.data() + begin;
  // A site that sat the exchange out (the others found it dead) got its own contribution back: it takes
  // the outer step on its own Δ alone, which is what it would do training by itself until a view takes
  // it back.
  if (config_.outer_average == OuterAverage::kPushSum) {
    // The outer step was taken at the sync; what comes back is the mixed numerator and weight, de-biased.
    weight_ = result.weight;
    for (std::size_t i = 0; i < len; ++i) g[i] = static_cast<float>(result.data[i] / weight_);
  } else {
    outer_step(begin, std::span<const float>(result.data).first(len));
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

void Diloco::outer_step(std::size_t begin, std::span<const float> d) {
  const float lr = static_cast<float>(config_.outer_lr), mu = static_cast<float>(config_.outer_momentum);
  float* g = global_.data() + begin;
  float* m = momentum_.data() + begin;
  for (std::size_t i = 0; i < d.size(); ++i) {
    m[i] = mu * m[i] + d[i];
    g[i] -= lr * (d[i] + mu * m[i]);
  }
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

void Diloco::read_residuals(std::span<float> out) const {
  if (feedback_.empty()) throw error::InternalError("diloco: a dense wire keeps no error-feedback residuals");
  if (out.size() != global_.size())
    throw error::InternalError("diloco: residuals of " + std::to_string(global_.size()) + " elements read into " +
                               std::to_string(out.size()));
  auto put = [&](std::uint32_t f, std::span<const float> residual) {
    const auto at = out.begin() + static_cast<std::ptrdiff_t>(fragments_.begin(f));
    // An empty residual is a fragment not compressed yet: nothing held back.
    if (residual.empty()) std::fill(at, out.begin() + static_cast<std::ptrdiff_t>(fragments_.end(f)), 0.0f);
    else std::copy(residual.begin(), residual.end(), at);
  };
  for (std::uint32_t f = 0; f < fragments_.count(); ++f) put(f, feedback_[f].residual());
  // τ <= H: at most one exchange of a fragment is in flight.
  for (const auto& exchange : pending_) put(exchange.fragment, exchange.residual);
}

void Diloco::write_residuals(std::span<const float> residuals) {
  if (feedback_.empty()) throw error::InternalError("diloco: a dense wire keeps no error-feedback residuals");
  if (residuals.size() != global_.size())
    throw error::InternalError("diloco: residuals of " + std::to_string(residuals.size()) + " elements for " +
                               std::to_string(global_.size()));
  if (!pending_.empty()) throw error::InternalError("diloco: residuals written back with an exchange in flight");
  for (std::uint32_t f = 0; f < fragments_.count(); ++f)
    feedback_[f].set_residual(residuals.subspan(fragments_.begin(f), fragments_.end(f) - fragments_.begin(f)));
}

}  // namespace meridian::gossip
