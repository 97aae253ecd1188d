// Where the parameters that DelayedMixing snapshots and corrects live. HostParameters (a host span) is
// what every mixer used so far; the daemon supplies one over a model's backend memory for the CUDA
// backend (daemon/backend/backend_parameters.h), so the delayed compensation runs on the device.
//
// A store may also read in the background (a device → pinned host copy that runs alongside the next
// step's compute): background_read() says so, and DelayedMixing then snapshots in two halves,
// begin_read() right after step k and end_read() when it hands the snapshot over, calling guard_writes()
// before anything may write the parameters again. The defaults read synchronously, in end_read().
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
  // parameters += step · (mixed − snapshot), both size() floats: the delayed compensation of docs/algorithms.md
  // x ← x + (m_s − x_s) with step 1, or the damped form of delayed_mixing.h.
  virtual void compensate(const float* mixed, const float* snapshot, float step) = 0;

  // True when begin_read()/end_read() overlap the read with other work.
  virtual bool background_read() const { return false; }
  // Starts reading the parameters as they are after everything the trainer did so far; returns at once.
  virtual void begin_read() {}
  // Orders every later write to the parameters behind the read begun last (no-op without one).
  virtual void guard_writes() {}
  // out (size()) ← the parameters as they were at begin_read(), waiting for the read if needed.
  virtual void end_read(float* out) { read(out); }
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
