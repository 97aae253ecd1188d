#include "gossip/delayed_mixing.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "error/error.h"
#include "gossip/synchronous_average.h"

namespace meridian::gossip {

DelayedMixing::DelayedMixing(DelayedMixingConfig config, MixChannel& channel, std::span<float> params,
                             std::span<float> stats, double* weight)
    : config_(config),
      channel_(channel),
      own_params_(std::make_unique<HostParameters>(params)),
      host_(params),
      params_(own_params_.get()),
      stats_(stats),
      weight_(weight) {
  check_config();
}

DelayedMixing::DelayedMixing(DelayedMixingConfig config, MixChannel& channel, ParameterStore& params,
                             std::span<float> stats, double* weight)
    : config_(config), channel_(channel), params_(&params), stats_(stats), weight_(weight) {
  check_config();
}

void DelayedMixing::check_config() {
  if (weight_ && config_.reaverage_every != 0)
    throw error::InternalError("delayed mixing: re-averaging does not apply to push-sum numerators");
  if (weight_) config_.reaverage_after_view_change = false;
  if (!(config_.mix_step > 0.0 && config_.mix_step <= 1.0))
    throw error::UserError("delayed mixing: mix_step must be in (0, 1]");
  // With D = 0 the mix of step k is applied at once, so its snapshot is needed at once.
  background_ = config_.delay > 0 && params_->background_read();
}

void DelayedMixing::note(const MixReport& report) {
  abandoned_ += report.abandoned;
  missing_ += report.missing;
  // The first view counts as a change: a site that starts or resumes mid-run is pulled in by the
  // re-average its peers run for the same view change.
  if ((!have_view_ || report.scheduled_view_id != view_id_) && config_.reaverage_after_view_change)
    reaverage_due_ = true;
  have_view_ = true;
  view_id_ = report.scheduled_view_id;
}

void DelayedMixing::apply(const Snapshot& s, MixResult& result) {
  note(result.report);
  const std::size_t np = params_->size();
  if (config_.delay == 0) {
    params_->assign(result.data.data());
    std::copy(result.data.begin() + static_cast<std::ptrdiff_t>(np), result.data.end(), stats_.begin());
    if (weight_) *weight_ = result.weight;
  } else {
    // Push-sum mass stays conserved for any α: every site moves by α times a conserved delta.
    const float a = static_cast<float>(config_.mix_step);
    params_->compensate(result.data.data(), s.x.data(), a);
    if (a == 1.0f) {
      for (std::size_t i = 0; i < stats_.size(); ++i) stats_[i] += result.data[np + i] - s.x[np + i];
    } else {
      for (std::size_t i = 0; i < stats_.size(); ++i) stats_[i] += a * (result.data[np + i] - s.x[np + i]);
    }
    if (weight_) *weight_ += config_.mix_step * (result.weight - s.weight);
  }
  channel_.recycle(std::move(result.data));
}

void DelayedMixing::apply_through(std::uint64_t last_step) {
  while (!pending_.empty() && pending_.front().step <= last_step) {
    Snapshot& s = pending_.front();
    MixResult result = channel_.wait(s.step, RoundTag::kMix, config_.wait_timeout);
    apply(s, result);
    channel_.recycle(std::move(s.x));
    pending_.pop_front();
  }
}

void DelayedMixing::apply_ready() {
  // In order only: a later mix is never applied before an earlier one.
  while (!pending_.empty()) {
    auto result = channel_.poll(pending_.front().step, RoundTag::kMix);
    if (!result) return;
    apply(pending_.front(), *result);
    channel_.recycle(std::move(pending_.front().x));
    pending_.pop_front();
  }
}

void DelayedMixing::reaverage(std::uint64_t k) {
  apply_through(UINT64_MAX);
  std::vector<float> buf = channel_.buffer();
  buf.resize(params_->size());
  params_->read(buf.data());
  buf.insert(buf.end(), stats_.begin(), stats_.end());
  MixReport report = average_now(channel_, k, buf, config_.wait_timeout, RoundTag::kReaverage);
  params_->assign(buf.data());
  std::copy(buf.begin() + static_cast<std::ptrdiff_t>(params_->size()), buf.end(), stats_.begin());
  channel_.recycle(std::move(buf));
  abandoned_ += report.abandoned;
  have_view_ = true;
  view_id_ = report.scheduled_view_id;
  reaverage_due_ = false;
  ++reaverages_;
}

void DelayedMixing::after_step(std::uint64_t k) {
  if (open_job_) {
    // Handing it over now would read parameters that the optimizer update may already have overwritten.
    throw error::InternalError("delayed mixing: after_step(" + std::to_string(k) + ") before the snapshot of step " +
                               std::to_string(open_job_->step) + " was handed over with before_update()");
  }
  if (config_.delay > 0) {
    if (config_.overlap) apply_ready();
    if (k >= config_.delay) apply_through(k - config_.delay);
  }
  // By absolute step, so that a site resuming mid-run agrees with the others.
  if (!weight_ && config_.reaverage_every != 0 && k > 0 && k % config_.reaverage_every == 0) reaverage_due_ = true;
  if (reaverage_due_) reaverage(k);

  MixJob job{k, RoundTag::kMix, channel_.buffer(), weight_ ? *weight_ : 1.0};
  job.data.resize(params_->size());
  job.data.insert(job.data.end(), stats_.begin(), stats_.end());
  if (background_) {
    // The statistics and the weight are taken now, with the parameters' copy started now: all of step k.
    params_->begin_read();
    open_job_ = std::move(job);
    return;
  }
  params_->read(job.data.data());
  hand_off(std::move(job));
  if (config_.delay == 0) apply_through(k);
}

void DelayedMixing::after_step(std::uint64_t k, const StepPass& pass) {
  const std::size_t n = params_->size();
  if (host_.empty() || !weight_ || !stats_.empty() || config_.delay == 0 || background_) {
    pass.before_mix(0, n);
    after_step(k);
    pass.after_snapshot(0, n);
    return;
  }
  fused_step(k, pass);
}

void DelayedMixing::fused_step(std::uint64_t k, const StepPass& pass) {
  // The mixes this step folds in, in the order after_step() applies them: in overlap mode those already
  // here, then (waiting for them) those the delay makes due. A wait that throws leaves x as it was.
  due_.clear();
  if (config_.overlap) {
    while (!pending_.empty()) {
      auto result = channel_.poll(pending_.front().step, RoundTag::kMix);
      if (!result) break;
      due_.push_back({std::move(pending_.front()), std::move(*result)});
      pending_.pop_front();
    }
  }
  if (k >= config_.delay) {
    while (!pending_.empty() && pending_.front().step <= k - config_.delay) {
      MixResult result = channel_.wait(pending_.front().step, RoundTag::kMix, config_.wait_timeout);
      due_.push_back({std::move(pending_.front()), std::move(result)});
      pending_.pop_front();
    }
  }
  // The scalar parts of apply(), in the same order. With a push-sum weight there is no re-averaging.
  for (Due& d : due_) {
    note(d.result.report);
    *weight_ += config_.mix_step * (d.result.weight - d.snapshot.weight);
  }

  const std::size_t n = host_.size();
  // The snapshot goes into the last mix's own buffers when there is one: each block of them is read
  // (m_s, x_s) before the same block is overwritten (x_k), and writing lines just read costs no fetch
  // from memory. Otherwise recycled buffers (a fresh one is zero-filled once, then reused).
  MixJob job{k, RoundTag::kMix, {}, *weight_};
  Snapshot snap{k, {}, *weight_};
  const bool reuse = !due_.empty() && due_.back().result.data.size() == n && due_.back().snapshot.x.size() == n;
  if (reuse) {
    job.data = std::move(due_.back().result.data);
    snap.x = std::move(due_.back().snapshot.x);
  } else {
    job.data = channel_.buffer();
    job.data.resize(n);
    snap.x = channel_.buffer();
    snap.x.resize(n);
  }
  const float a = static_cast<float>(config_.mix_step);
  float* x = host_.data();
  float* out = job.data.data();
  float* keep = snap.x.data();
  // 1024 floats: the blocks of x, z, m_s, x_s and the two snapshot copies fit in a 32 KiB L1 together.
  constexpr std::size_t kBlock = 1024;
  for (std::size_t begin = 0; begin < n; begin += kBlock) {
    const std::size_t end = std::min(n, begin + kBlock);
    pass.before_mix(begin, end);
    for (std::size_t j = 0; j < due_.size(); ++j) {
      // The last mix's buffers may be `out` and `keep` themselves (see above): read here, written below.
      const bool moved = reuse && j + 1 == due_.size();
      const float* m = moved ? out : due_[j].result.data.data();
      const float* s = moved ? keep : due_[j].snapshot.x.data();
      // The arithmetic of HostParameters::compensate, element by element.
      if (a == 1.0f) {
        for (std::size_t i = begin; i < end; ++i) x[i] += m[i] - s[i];
      } else {
        for (std::size_t i = begin; i < end; ++i) x[i] += a * (m[i] - s[i]);
      }
    }
    std::copy(x + begin, x + end, out + begin);
    std::copy(x + begin, x + end, keep + begin);
    pass.after_snapshot(begin, end);
  }
  for (Due& d : due_) {
    channel_.recycle(std::move(d.result.data));
    channel_.recycle(std::move(d.snapshot.x));
  }
  due_.clear();
  channel_.submit(std::move(job), config_.wait_timeout);
  pending_.push_back(std::move(snap));
}

void DelayedMixing::before_update() {
  if (!open_job_) return;
  params_->guard_writes();
  MixJob job = std::move(*open_job_);
  open_job_.reset();
  params_->end_read(job.data.data());
  hand_off(std::move(job));
}

void DelayedMixing::hand_off(MixJob job) {
  Snapshot snap{job.step, {}, job.weight};
  if (config_.delay > 0) {
    snap.x = channel_.buffer();
    snap.x.assign(job.data.begin(), job.data.end());
  }
  channel_.submit(std::move(job), config_.wait_timeout);
  pending_.push_back(std::move(snap));
}

void DelayedMixing::finish() {
  before_update();
  apply_through(UINT64_MAX);
}

}  // namespace meridian::gossip
