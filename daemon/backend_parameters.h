// The parameters of a model in its backend's memory, as DelayedMixing sees them (gossip/parameter_store.h):
// the daemon's dsync on a device backend. A snapshot is one device → host copy of the parameters; the
// mixed result and the snapshot go back up, and the delayed compensation x ← x + α·(m_s − x_s) runs on the
// backend through its element-wise operations (delayed_compensation for α = 1; push-sum scale and add
// for the damped form), i.e. the functions of models/elementwise_math.h that the CPU tests cover.
//
// Ownership: borrows the model, which must outlive it; owns two scratch buffers of the model's size in
// backend memory (allocated once). Thread safety: the trainer thread only. Throws what the backend throws.
#pragma once

#include "gossip/parameter_store.h"
#include "models/backend_buffer.h"
#include "models/model.h"

namespace meridian::daemon {

class BackendParameters final : public gossip::ParameterStore {
 public:
  explicit BackendParameters(models::Model& model);

  std::size_t size() const override { return model_.parameter_count(); }
  void read(float* out) override;
  void assign(const float* in) override;
  void compensate(const float* mixed, const float* snapshot, float step) override;

 private:
  models::Model& model_;
  models::BackendBuffer<float> mixed_, snapshot_;  // (n) the uploaded m_s and x_s
};

}  // namespace meridian::daemon
