#include "daemon/backend_parameters.h"

namespace meridian::daemon {

BackendParameters::BackendParameters(models::Model& model)
    : model_(model),
      mixed_(model.backend(), model.parameter_count()),
      snapshot_(model.backend(), model.parameter_count()) {}

void BackendParameters::read(float* out) { model_.read_parameters({out, size()}); }

void BackendParameters::assign(const float* in) { model_.write_parameters({in, size()}); }

void BackendParameters::compensate(const float* mixed, const float* snapshot, float step) {
  models::Backend& backend = model_.backend();
  const std::size_t n = size();
  backend.copy_from_host(mixed_.data(), mixed, n * sizeof(float));
  backend.copy_from_host(snapshot_.data(), snapshot, n * sizeof(float));
  float* x = model_.parameters().data();
  if (step == 1.0f) {
    backend.delayed_compensation(n, x, mixed_.data(), snapshot_.data());
    return;
  }
  // x ← x + α·(m − s) from the push-sum primitives: s ← −s, m ← m + s, m ← α·m, x ← x + m.
  backend.push_sum_scale(n, snapshot_.data(), -1.0f);
  backend.push_sum_add(n, mixed_.data(), snapshot_.data());
  backend.push_sum_scale(n, mixed_.data(), step);
  backend.push_sum_add(n, x, mixed_.data());
}

}  // namespace meridian::daemon
