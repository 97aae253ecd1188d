#include "daemon/backend/backend_parameters.h"

#include <algorithm>
#include <utility>

namespace meridian::daemon {

BackendParameters::BackendParameters(models::Backend& backend, std::span<float> params,
                                     std::unique_ptr<AsyncParameterCopy> copy)
    : backend_(backend),
      params_(params),
      mixed_(backend, params.size()),
      snapshot_(backend, params.size()),
      copy_(std::move(copy)) {}

void BackendParameters::read(float* out) { backend_.copy_to_host(out, params_.data(), params_.size_bytes()); }

void BackendParameters::assign(const float* in) { backend_.copy_from_host(params_.data(), in, params_.size_bytes()); }

void BackendParameters::begin_read() {
  if (copy_) copy_->start(params_.data(), params_.size());
}

void BackendParameters::guard_writes() {
  if (copy_) copy_->guard_writes();
}

void BackendParameters::end_read(float* out) {
  if (!copy_) {
    read(out);
    return;
  }
  // Pinned → the channel's pageable buffer: a host copy, at host memory speed.
  const std::span<const float> taken = copy_->wait();
  std::copy(taken.begin(), taken.end(), out);
}

void BackendParameters::compensate(const float* mixed, const float* snapshot, float step) {
  const std::size_t n = size();
  backend_.copy_from_host(mixed_.data(), mixed, n * sizeof(float));
  backend_.copy_from_host(snapshot_.data(), snapshot, n * sizeof(float));
  float* x = params_.data();
  if (step == 1.0f) {
    backend_.delayed_compensation(n, x, mixed_.data(), snapshot_.data());
    return;
  }
  // x ← x + α·(m − s) from the push-sum primitives: s ← −s, m ← m + s, m ← α·m, x ← x + m.
  backend_.push_sum_scale(n, snapshot_.data(), -1.0f);
  backend_.push_sum_add(n, mixed_.data(), snapshot_.data());
  backend_.push_sum_scale(n, mixed_.data(), step);
  backend_.push_sum_add(n, x, mixed_.data());
}

}  // namespace meridian::daemon
