// A convolution as products that read each zero-padded input image in place (models/offset_gemm.h)
// instead of im2col's column matrix, which for a 3×3 kernel is nine times the image.
//
// Stride 1: output pixel (y, x) is computed at grid position y·Wg + x, where Wg is the padded width, and
// tap (c, ky, kx) reads the padded image c·plane + ky·Wg + kx further on; the positions x >= out_w of each
// row are computed and dropped. Stride s > 1: the padded image is first split into its s² phases (the
// pixels whose row and column leave remainders a and b when divided by s), each a plane of width Wg;
// tap (c, ky, kx) then reads phase (ky mod s, kx mod s) shifted by (ky / s, kx / s), which is again one
// offset, so the same product serves. The phase planes of every image are kept from the forward pass
// for the weight gradient (about the size of the images themselves).
//
// Backward: the weight gradient is dout (laid on the same grid, zeros between rows) times the shifted
// images transposed. The input gradient is, for a stride-1 convolution padded to keep its size, the same
// product over the padded dout with the weights flipped in space and transposed in channels (the full
// correlation); otherwise each phase's gradient is such a product over the taps that read that phase,
// and the phases are put back together into the image gradient.
//
// Summation order differs from im2col + OpenBLAS, so results agree with Im2colConvolution to float
// rounding, not bit for bit. Usable only where offset_gemm::available() (AVX2 + FMA); the CPU backend
// falls back to im2col elsewhere (supports()).
//
// Ownership: borrows the backend (which must outlive it); owns its workspaces, allocated from the
// backend. Thread safety: one thread at a time.
#pragma once

#include <cstdint>
#include <vector>

#include "models/backend.h"
#include "models/backend_buffer.h"
#include "models/convolution.h"

namespace meridian::models {

class ImplicitGemmConvolution final : public Convolution {
 public:
  // True when this CPU runs the kernels (offset_gemm::available()) and `g` is a valid geometry.
  static bool supports(const ConvGeometry& g);

  // Throws error::InternalError when !supports(g).
  ImplicitGemmConvolution(Backend& backend, const ConvGeometry& g, std::size_t out_channels);

  void reserve(std::size_t batch) override;
  void forward(std::size_t batch, const float* in, const float* weight, const float* bias, float* out) override;
  void backward(std::size_t batch, const float* in, const float* dout, const float* weight, float* dweight,
                float* dbias, float* din) override;

 private:
  // The taps (ky, kx) that read phase (a, b): ky mod s = a and kx mod s = b.
  struct Phase {
    std::size_t a = 0, b = 0;
    std::vector<std::size_t> taps;      // ky·k + kx
    std::vector<std::int32_t> offsets;  // (out_c · taps): where each reads the padded dout
    std::size_t weight_at = 0;          // its (in_c, out_c · taps) weights start here in flipped_
  };

  void spread_image(const float* image, float* phases) const;
  void input_gradient_same(const float* dpadded, float* image_din);
  void input_gradient_phases(const float* dpadded, float* image_din);

  Backend& backend_;
  ConvGeometry geometry_;
  std::size_t out_channels_;
  bool same_;  // stride 1 and the output the size of the input
  std::size_t stride_;
  std::size_t width_;                        // Wg: row width of the phase planes, the padded dout and every grid
  std::size_t phase_rows_;                   // rows of a phase plane
  std::size_t phase_plane_;                  // phase_rows_ · width_
  std::size_t margin_;                       // zero rows and columns above and left of dout in dpadded_
  std::size_t dout_plane_;                   // floats per channel of dpadded_
  std::size_t positions_;                    // output grid positions: (out_h − 1)·Wg + out_w
  std::size_t gradient_positions_;           // input-gradient grid positions
  std::size_t grid_stride_;                  // row stride of grid_: whole column blocks
  std::vector<std::int32_t> input_offsets_;  // (in_c · k²): where each tap reads an image's phase planes
  std::vector<std::int32_t> same_offsets_;   // (out_c · k²): the same-size case's taps over dpadded_
  std::vector<Phase> phases_;                // the strided case's phases
  std::size_t reserved_batch_ = 0;
  std::size_t stack_ = 1;         // images per weight-gradient product (offset_gemm::Stack)
  BackendBuffer<float> padded_;   // (batch, in_c · s², phase_plane_) + slack: every image of the last forward
  BackendBuffer<float> dpadded_;  // (stack_, out_c, dout_plane_) + slack: dout inside a zero margin
  BackendBuffer<float> grid_;     // (max(in_c, out_c), grid_stride_): one product before its rows are cut out
  BackendBuffer<float> flipped_;  // (in_c · out_c · k²): the weights of the input gradient
};

}  // namespace meridian::models
