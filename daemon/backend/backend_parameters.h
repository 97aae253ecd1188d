// Parameters in a backend's memory, as DelayedMixing sees them (gossip/parameter_store.h): the daemon's
// dsync and sgp on a device backend. A snapshot is one device → host copy of the parameters; the
// mixed result and the snapshot go back up, and the delayed compensation x ← x + α·(m_s − x_s) runs on the
// backend through its element-wise operations (delayed_compensation for α = 1; push-sum scale and add
// for the damped form), i.e. the functions of models/elementwise_math.h that the CPU tests cover.
// Given an AsyncParameterCopy (a GPU: daemon/backend/async_parameter_copy.h), the store reads in the background:
// DelayedMixing's snapshot is then a pinned copy that runs alongside the next step's forward and
// backward pass (gossip/delayed_mixing.h, "Background snapshots"); read() stays synchronous.
//
// Ownership: borrows the backend and the parameters, which must outlive it; owns two scratch buffers of
// the parameters' size in backend memory (allocated once) and the background copy, if any. Thread safety: the trainer
// thread only. Throws what the backend throws.
#pragma once

#include <memory>
#include <span>

#include "daemon/backend/async_parameter_copy.h"
#include "gossip/parameter_store.h"
#include "models/backend.h"
#include "models/backend_buffer.h"

namespace meridian::daemon {

class BackendParameters final : public gossip::ParameterStore {
 public:
  // `params` is backend memory of `backend`; `copy` (room for params.size() floats, or nullptr for
  // synchronous reads only) copies from the same backend.
  BackendParameters(models::Backend& backend, std::span<float> params,
                    std::unique_ptr<AsyncParameterCopy> copy = nullptr);

  std::size_t size() const override { return params_.size(); }
  void read(float* out) override;
  void assign(const float* in) override;
  void compensate(const float* mixed, const float* snapshot, float step) override;
  bool background_read() const override { return copy_ != nullptr; }
  void begin_read() override;
  void guard_writes() override;
  void end_read(float* out) override;

 private:
  models::Backend& backend_;
  std::span<float> params_;
  models::BackendBuffer<float> mixed_, snapshot_;  // (n) the uploaded m_s and x_s
  std::unique_ptr<AsyncParameterCopy> copy_;       // the background read; nullptr: read synchronously
};

}  // namespace meridian::daemon
