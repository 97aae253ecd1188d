// Max pooling that records each window's argmax in the forward pass and routes the gradient through it
// in the backward pass, over a Backend's max_pool_forward/backward (the CPU backend's make_max_pooling).
//
// Ownership: borrows the backend (which must outlive it); owns the argmax record, allocated from the
// backend. Thread safety: one thread at a time.
#pragma once

#include <cstdint>

#include "models/backend.h"
#include "models/backend_buffer.h"
#include "models/max_pooling.h"

namespace meridian::models {

class ArgmaxMaxPooling final : public MaxPooling {
 public:
  ArgmaxMaxPooling(Backend& backend, const PoolGeometry& g) : backend_(backend), geometry_(g) {}

  void reserve(std::size_t batch) override {
    argmax_.reserve(backend_, batch * geometry_.channels * geometry_.out_height() * geometry_.out_width());
  }
  void forward(std::size_t batch, const float* in, float* out) override {
    reserve(batch);
    backend_.max_pool_forward(geometry_, batch, in, out, argmax_.data());
  }
  void backward(std::size_t batch, const float*, const float*, const float* dout, float* din) override {
    backend_.max_pool_backward(geometry_, batch, dout, argmax_.data(), din);
  }

 private:
  Backend& backend_;
  PoolGeometry geometry_;
  BackendBuffer<std::int32_t> argmax_;  // (batch, channels, out_h, out_w): offset inside the input plane
};

}  // namespace meridian::models
