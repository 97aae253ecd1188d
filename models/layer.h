// A layer of a sequential model. Its parameters and their gradients are views into the model's one
// contiguous buffer (bind), its state (batch norm's running statistics: saved with the model, never a
// gradient) a view into the model's second buffer (bind_state), its activations are buffers the model owns, and its own
// workspace (im2col columns, pooling argmax, cuDNN descriptors) is made by the backend, sized once by reserve() and
// reused by every step. All of them are backend memory (host memory only on the CPU backend).
//
// Not thread-safe; the model drives it from the trainer thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "models/backend.h"
#include "models/initializer.h"
#include "models/shape.h"

namespace meridian::models {

class Layer {
 public:
  virtual ~Layer() = default;

  // Architecture and sizes, e.g. "conv2d(1->6,k5,s1,p2)"; part of the model fingerprint.
  virtual std::string describe() const = 0;
  // A new layer of the same architecture, unbound and without workspace (for batch-splitting threads,
  // which share the parameters and keep their own activations and gradients).
  virtual std::unique_ptr<Layer> clone() const = 0;
  virtual Shape input_shape() const = 0;
  virtual Shape output_shape() const = 0;

  virtual std::size_t parameter_count() const { return 0; }
  // Points the layer at its slice of the model's parameter and gradient buffers (each of
  // parameter_count() floats, backend memory). The spans must outlive the layer's use.
  virtual void bind(std::span<float> parameters, std::span<float> gradients) {}
  // Model state that is not trained by gradients (batch norm's running statistics): state_count() floats,
  // bound like the parameters into the model's state buffer (backend memory). Default: none.
  virtual std::size_t state_count() const { return 0; }
  virtual void bind_state(std::span<float> state) {}
  // Draws the parameters into the bound spans and resets the bound state; both must be host memory for
  // this call (the model binds host staging buffers for it on a device backend). Layers that draw random
  // numbers while training (dropout) take their seed from `random` here.
  virtual void initialize(SplitMix64& random) {}
  // Training behaviour (batch statistics, dropout on) or evaluation behaviour (running statistics, dropout
  // off). A new layer trains. The model sets it before every forward pass.
  virtual void set_training(bool training) {}
  // Random draws come from stream `stream` of the layer's seed (default 0): the model gives each of its
  // batch-splitting replicas its own, so their dropout masks differ.
  virtual void set_stream(std::uint64_t stream) {}
  // Sizes the layer's workspace, allocated from `backend` (the one later passed to forward/backward), for
  // batches of up to `batch` samples. Allocates only when growing.
  virtual void reserve(Backend& backend, std::size_t batch) {}

  // out (batch, output) from in (batch, input).
  virtual void forward(Backend& backend, const float* in, float* out, std::size_t batch) = 0;
  // Writes (overwrites) the parameter gradients and, unless din is null, the input gradient
  // din (batch, input) from dout (batch, output). in/out are the values of the last forward().
  virtual void backward(Backend& backend, const float* in, const float* out, const float* dout, float* din,
                        std::size_t batch) = 0;

  // Per-example gradient norms, for DP-SGD's clipping (models/per_example_norms.h). With `squared_norms`
  // non-null, every later backward() adds to squared_norms[b] (batch entries, host memory) the squared
  // norm of the gradient of this layer's parameters due to example b alone, row b of dout being that
  // example's own output gradient; it computes din as usual and may leave the parameter gradients
  // unwritten. Null restores ordinary backward passes. Host-addressable backends only. Returns false,
  // changing nothing, when the layer has parameters whose per-example gradients it cannot separate
  // (batch norm: its batch statistics mix the examples of a batch).
  virtual bool track_per_example_norms(double* squared_norms) { return parameter_count() == 0; }
};

}  // namespace meridian::models
