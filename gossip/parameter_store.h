// Where the parameters that DelayedMixing snapshots and corrects live. HostParameters (a host span) is
// what every mixer used so far; the daemon supplies one over a model's backend memory for the CUDA
// backend (daemon/backend_parameters.h), so the delayed compensation runs on the device.
//
// Ownership: a store does not own the parameters. Thread safety: the trainer thread only.
#pragma once

#include <cstddef>
#include <span>

namespace meridian::gossip {

class ParameterStore {
 public:
  virtual ~ParameterStore() = default;
  virtual std::size_t size() const = 0;
  // out (size()) ← the parameters, as they are after everything the trainer did so far.
  virtual void read(float* out) = 0;
  // parameters ← in (size()).
  virtual void assign(const float* in) = 0;
  // parameters += step · (mixed − snapshot), both size() floats: DESIGN.md's delayed compensation
  // x ← x + (m_s − x_s) with step 1, or the damped form of delayed_mixing.h.
  virtual void compensate(const float* mixed, const float* snapshot, float step) = 0;
};

// Parameters in host memory, borrowed as a span that must outlive the store.
class HostParameters final : public ParameterStore {
 public:
  explicit HostParameters(std::span<float> params) : params_(params) {}
  std::size_t size() const override { return params_.size(); }
  void read(float* out) override;
  void assign(const float* in) override;
  void compensate(const float* mixed, const float* snapshot, float step) override;

 private:
  std::span<float> params_;
};

}  // namespace meridian::gossip
