// The squared norm of each example's own parameter gradient, layer by layer, computed from what the
// backward pass already has (the layer's input and its output gradient) without forming the batch of
// per-example gradients: DP-SGD clips each example's gradient to a norm (Abadi et al. 2016), and the
// norms are what the clipping needs (ghost clipping: Goodfellow 2015, Li et al. 2021, Bu et al. 2022).
// The sums over layers make the whole model's per-example norms; a second backward pass with each
// example's output gradient scaled by its clipping factor then gives the clipped sum (models/model.h).
//
// Pointers are host memory (the CPU backend). `squared_norms` has one entry per example; each function
// adds to it. Shapes are given next to each argument.
#pragma once

#include <cstddef>

#include "models/backend.h"
#include "models/backend_buffer.h"

namespace meridian::models {

// Linear y = x·Wᵀ + b: example b's weight gradient is the outer product dout_b ⊗ x_b, whose squared
// norm is ‖dout_b‖²·‖x_b‖²; its bias gradient adds ‖dout_b‖². x (batch, in), dout (batch, out).
void add_linear_norms(std::size_t batch, std::size_t in, std::size_t out, const float* x, const float* dout,
                      double* squared_norms);

// Group normalization with γ, β per channel: example b's gradients are dγ[c] = Σ_pixels dout·x̂ and
// dβ[c] = Σ_pixels dout, with x̂ = (in − mean)·inv_std of its group. in, dout (l.batch, l.channels, l.pixels);
// mean, inv_std (l.batch, groups), as the forward pass wrote them.
void add_group_norm_norms(const ChannelLayout& l, std::size_t groups, const float* in, const float* dout,
                          const float* mean, const float* inv_std, double* squared_norms);

// A 2-D convolution's per-example norms, with its workspace. Example b's weight gradient is
// D_b·X_bᵀ, D_b (out_c, P) its output gradient and X_b (patch, P) its im2col'd input over the P output
// pixels. Two ways to its squared norm, whichever costs fewer multiplications for the geometry:
// - materialized: form D_b·X_bᵀ (out_c·patch·P), then sum its squares;
// - Gram: ‖D_b·X_bᵀ‖² = Σ_pq (X_bᵀX_b)_pq·(D_bᵀD_b)_pq (P²·(patch + out_c)), which wins when the image
//   is small against the filters.
// The bias gradient adds Σ_o (Σ_p D_b[o, p])².
//
// Ownership: borrows the backend, which must outlive it. One thread at a time.
class ConvolutionNorms {
 public:
  enum class Method { materialized, gram };

  ConvolutionNorms(const ConvGeometry& g, std::size_t out_channels);
  // The cheaper method for this geometry, unless `method` forces one (tests compare both).
  ConvolutionNorms(const ConvGeometry& g, std::size_t out_channels, Method method);

  Method method() const { return method_; }
  // in (batch, in_c, in_h, in_w), dout (batch, out_c, out_h, out_w). Allocates its workspace (one
  // image's worth) on the first call only.
  void add(Backend& backend, std::size_t batch, const float* in, const float* dout, double* squared_norms);

 private:
  ConvGeometry geometry_;
  std::size_t out_channels_;
  Method method_;
  BackendBuffer<float> columns_;  // (patch, P): one image's im2col
  BackendBuffer<float> product_;  // materialized: (out_c, patch); Gram: (P, P) twice
};

}  // namespace meridian::models
