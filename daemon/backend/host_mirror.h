// Host views of a model's parameters, gradients and state (batch norm's running statistics) for the
// trainer algorithms, whose gossip/ parts (DelayedMixing, PushSum, Dts, average_now) work on host spans.
// On a host-addressable backend (the CPU) the views are the model's own buffers and pull/push do
// nothing, so the CPU path is exactly what it was. On a device backend (CUDA) they are host copies:
// pull_*() copies the device buffer into the view (after every operation enqueued before), push_*()
// copies the view back onto the device.
//
// Ownership: borrows the model, which must outlive it; owns the host copies (allocated once). Thread
// safety: the trainer thread only.
#pragma once

#include <span>
#include <vector>

#include "models/model.h"

namespace meridian::daemon {

class HostMirror {
 public:
  explicit HostMirror(models::Model& model);

  // True when the views are copies (a device backend) rather than the model's buffers.
  bool mirrored() const { return mirrored_; }
  std::span<float> parameters() { return parameters_; }
  std::span<float> gradients() { return gradients_; }
  // The model's state (models::Model::state()); empty for a model without normalization statistics.
  std::span<float> state() { return state_; }

  void pull_parameters();
  void push_parameters();
  void pull_gradients();
  void push_gradients();
  // The state changes with every forward pass in training mode: an algorithm that mixes it pulls it
  // before it reads the view and pushes it after it wrote it (a small synchronous copy on a device).
  void pull_state();
  void push_state();

 private:
  models::Model& model_;
  bool mirrored_;
  std::vector<float> host_parameters_, host_gradients_;  // (n) each; empty when not mirrored
  std::vector<float> host_state_;                        // (state) empty when not mirrored
  std::span<float> parameters_, gradients_, state_;
};

}  // namespace meridian::daemon
