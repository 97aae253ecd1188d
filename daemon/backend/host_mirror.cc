#include "daemon/backend/host_mirror.h"

namespace meridian::daemon {

HostMirror::HostMirror(models::Model& model) : model_(model), mirrored_(!model.backend().host_addressable()) {
  if (!mirrored_) {
    parameters_ = model.parameters();
    gradients_ = model.gradients();
    state_ = model.state();
    return;
  }
  host_parameters_.resize(model.parameter_count());
  host_gradients_.resize(model.parameter_count());
  parameters_ = host_parameters_;
  gradients_ = host_gradients_;
  host_state_.resize(model.state_count());
  state_ = host_state_;
  // The algorithms read the starting parameters when they are built (push-sum's numerator, DTS).
  pull_parameters();
}

void HostMirror::pull_parameters() {
  if (mirrored_) model_.read_parameters(parameters_);
}

void HostMirror::push_parameters() {
  if (mirrored_) model_.write_parameters(parameters_);
}

void HostMirror::pull_gradients() {
  if (mirrored_) model_.backend().copy_to_host(gradients_.data(), model_.gradients().data(), gradients_.size_bytes());
}

void HostMirror::push_gradients() {
  if (mirrored_) model_.backend().copy_from_host(model_.gradients().data(), gradients_.data(), gradients_.size_bytes());
}

void HostMirror::pull_state() {
  if (mirrored_ && !state_.empty()) model_.read_state(state_);
}

void HostMirror::push_state() {
  if (mirrored_ && !state_.empty()) model_.write_state(state_);
}

}  // namespace meridian::daemon
