#include "models/implicit_gemm_convolution.h"

#include <algorithm>
#include <cstring>

#include "error/error.h"
#include "models/offset_gemm.h"

namespace meridian::models {

namespace {

// Reads past a buffer's last plane: multiply() reads whole column blocks beyond the last position,
// multiply_transposed() whole reduction steps. The slack stays zero.
constexpr std::size_t kSlack = offset_gemm::kColumnBlock;

// What one stack of the weight gradient's images (their phase planes and dout) may take: half an L2.
constexpr std::size_t kStackBytes = 256 * 1024;

std::size_t divide_up(std::size_t n, std::size_t d) { return (n + d - 1) / d; }

}  // namespace

bool ImplicitGemmConvolution::supports(const ConvGeometry& g) {
  return offset_gemm::available() && g.kernel > 0 && g.stride > 0 && g.in_height + 2 * g.padding >= g.kernel &&
         g.in_width + 2 * g.padding >= g.kernel;
}

ImplicitGemmConvolution::ImplicitGemmConvolution(Backend& backend, const ConvGeometry& g, std::size_t out_channels)
    : backend_(backend), geometry_(g), out_channels_(out_channels) {
  if (!supports(g)) throw error::InternalError("implicit GEMM convolution: needs AVX2 and FMA, and a kernel that fits");
  const std::size_t k = g.kernel, s = g.stride, p = g.padding;
  const std::size_t padded_h = g.in_height + 2 * p, padded_w = g.in_width + 2 * p;
  const std::size_t oh = g.out_height(), ow = g.out_width();
  stride_ = s;
  same_ = s == 1 && 2 * p + 1 == k;
  if (same_) {
    // dout padded like the input: the full correlation then lands on the input's own pixels.
    width_ = padded_w;
    phase_rows_ = padded_h;
    margin_ = p;
    gradient_positions_ = (g.in_height - 1) * width_ + g.in_width;
  } else {
    // A phase row holds ⌈padded_w / s⌉ pixels; the extra `margin_` zero columns let the input gradient's
    // taps reach that far left of dout and still read zeros without wrapping into the previous row.
    margin_ = (k - 1) / s;
    width_ = divide_up(padded_w, s) + margin_;
    phase_rows_ = divide_up(padded_h, s);
    gradient_positions_ = (phase_rows_ - 1) * width_ + divide_up(padded_w, s);
  }
  phase_plane_ = phase_rows_ * width_;
  // Rows of dout with the margin above and below, plus a reduction step of zeros for the weight gradient's
  // last step.
  dout_plane_ = (same_ ? padded_h : phase_rows_ + margin_) * width_ + offset_gemm::kReductionStep;
  positions_ = (oh - 1) * width_ + ow;
  grid_stride_ = offset_gemm::round_up(std::max(positions_, gradient_positions_), offset_gemm::kColumnBlock);

  for (std::size_t c = 0; c < g.in_channels; ++c)
    for (std::size_t ky = 0; ky < k; ++ky)
      for (std::size_t kx = 0; kx < k; ++kx) {
        const std::size_t phase = c * s * s + (ky % s) * s + kx % s;
        input_offsets_.push_back(static_cast<std::int32_t>(phase * phase_plane_ + (ky / s) * width_ + kx / s));
      }
  if (same_) {
    for (std::size_t o = 0; o < out_channels; ++o)
      for (std::size_t ky = 0; ky < k; ++ky)
        for (std::size_t kx = 0; kx < k; ++kx)
          same_offsets_.push_back(static_cast<std::int32_t>(o * dout_plane_ + ky * width_ + kx));
    return;
  }
  // Phase (a, b) gets from dout pixel (i − ky/s, j − kx/s) through tap (ky, kx): in dpadded_, whose dout
  // starts margin_ rows down and margin_ columns in, that is (margin_ − ky/s, margin_ − kx/s) from (i, j).
  std::size_t weight_at = 0;
  for (std::size_t a = 0; a < s; ++a)
    for (std::size_t b = 0; b < s; ++b) {
      Phase phase;
      phase.a = a;
      phase.b = b;
      for (std::size_t ky = a; ky < k; ky += s)
        for (std::size_t kx = b; kx < k; kx += s) phase.taps.push_back(ky * k + kx);
      for (std::size_t o = 0; o < out_channels; ++o)
        for (std::size_t tap : phase.taps) {
          const std::size_t ky = tap / k, kx = tap % k;
          phase.offsets.push_back(
              static_cast<std::int32_t>(o * dout_plane_ + (margin_ - ky / s) * width_ + (margin_ - kx / s)));
        }
      phase.weight_at = weight_at;
      weight_at += g.in_channels * out_channels * phase.taps.size();
      phases_.push_back(std::move(phase));
    }
}

void ImplicitGemmConvolution::reserve(std::size_t batch) {
  if (batch <= reserved_batch_) return;
  const ConvGeometry& g = geometry_;
  const std::size_t padded_size = g.in_channels * stride_ * stride_ * phase_plane_;
  const std::size_t dout_size = out_channels_ * dout_plane_;
  stack_ = std::clamp<std::size_t>(kStackBytes / ((padded_size + dout_size) * sizeof(float)), 1, batch);
  padded_.reserve(backend_, batch * padded_size + kSlack);
  dpadded_.reserve(backend_, stack_ * dout_size + kSlack);
  grid_.reserve(backend_, std::max(g.in_channels, out_channels_) * grid_stride_);
  flipped_.reserve(backend_, g.in_channels * out_channels_ * g.kernel * g.kernel);
  reserved_batch_ = batch;
}

// Pixel (y, x) of channel c sits at (Y, X) = (y + p, x + p) of the padded image, which is pixel
// (Y / s, X / s) of phase (Y mod s, X mod s). The zero border and margins are never written.
void ImplicitGemmConvolution::spread_image(const float* image, float* phases) const {
  const ConvGeometry& g = geometry_;
  const std::size_t h = g.in_height, w = g.in_width, s = stride_, p = g.padding;
  for (std::size_t c = 0; c < g.in_channels; ++c)
    for (std::size_t y = 0; y < h; ++y) {
      const float* row = image + (c * h + y) * w;
      const std::size_t Y = y + p;
      if (s == 1) {
        std::memcpy(phases + c * phase_plane_ + Y * width_ + p, row, w * sizeof(float));
        continue;
      }
      // Column by column of the phase: every s-th pixel, no division per pixel.
      for (std::size_t b = 0; b < s; ++b) {
        float* to = phases + (c * s * s + (Y % s) * s + b) * phase_plane_ + (Y / s) * width_;
        const std::size_t x0 = (b + s - p % s) % s;
        for (std::size_t x = x0, j = (x0 + p) / s; x < w; x += s, ++j) to[j] = row[x];
      }
    }
}

void ImplicitGemmConvolution::forward(std::size_t batch, const float* in, const float* weight, const float* bias,
                                      float* out) {
  reserve(batch);
  const ConvGeometry& g = geometry_;
  const std::size_t oh = g.out_height(), ow = g.out_width(), patch = g.patch_size();
  const std::size_t in_size = g.in_channels * g.in_height * g.in_width, out_size = out_channels_ * oh * ow;
  const std::size_t padded_size = g.in_channels * stride_ * stride_ * phase_plane_;
  for (std::size_t b = 0; b < batch; ++b) {
    float* padded = padded_.data() + b * padded_size;
    spread_image(in + b * in_size, padded);
    // grid (out_c, positions) = W (out_c, patch) · shifted phase planes (patch, positions)
    offset_gemm::multiply(out_channels_, positions_, patch, weight, patch, padded, input_offsets_.data(), grid_.data(),
                          grid_stride_);
    float* image_out = out + b * out_size;
    for (std::size_t c = 0; c < out_channels_; ++c)
      for (std::size_t y = 0; y < oh; ++y) {
        const float* from = grid_.data() + c * grid_stride_ + y * width_;
        float* to = image_out + (c * oh + y) * ow;
        for (std::size_t x = 0; x < ow; ++x) to[x] = from[x] + bias[c];
      }
  }
}

// din (in_c, h, w) from one image's padded dout with the weights in flipped_ (flipped[c][o·k² + t] =
// W[o][c][k² − 1 − t]).
void ImplicitGemmConvolution::input_gradient_same(const float* dpadded, float* image_din) {
  const ConvGeometry& g = geometry_;
  const std::size_t h = g.in_height, w = g.in_width, k2 = g.kernel * g.kernel;
  // din grid (in_c, positions) = flipped (in_c, out_c · k²) · shifted padded dout (out_c · k², positions)
  offset_gemm::multiply(g.in_channels, gradient_positions_, out_channels_ * k2, flipped_.data(), out_channels_ * k2,
                        dpadded, same_offsets_.data(), grid_.data(), grid_stride_);
  for (std::size_t c = 0; c < g.in_channels; ++c)
    for (std::size_t y = 0; y < h; ++y)
      std::memcpy(image_din + (c * h + y) * w, grid_.data() + c * grid_stride_ + y * width_, w * sizeof(float));
}

// din (in_c, h, w) phase by phase: each phase's gradient is a product over its taps, and pixel (y, x)
// takes its value from phase ((y + p) mod s, (x + p) mod s) at ((y + p) / s, (x + p) / s).
void ImplicitGemmConvolution::input_gradient_phases(const float* dpadded, float* image_din) {
  const ConvGeometry& g = geometry_;
  const std::size_t h = g.in_height, w = g.in_width, s = stride_, p = g.padding;
  for (const Phase& phase : phases_) {
    const std::size_t n = out_channels_ * phase.taps.size();
    if (n > 0)
      offset_gemm::multiply(g.in_channels, gradient_positions_, n, flipped_.data() + phase.weight_at, n, dpadded,
                            phase.offsets.data(), grid_.data(), grid_stride_);
    for (std::size_t c = 0; c < g.in_channels; ++c)
      for (std::size_t y = (phase.a + s - p % s) % s; y < h; y += s) {
        const float* from = grid_.data() + c * grid_stride_ + ((y + p) / s) * width_;
        float* to = image_din + (c * h + y) * w;
        const std::size_t x0 = (phase.b + s - p % s) % s;
        if (n == 0) {
          for (std::size_t x = x0; x < w; x += s) to[x] = 0.0f;
        } else {
          for (std::size_t x = x0, j = (x0 + p) / s; x < w; x += s, ++j) to[x] = from[j];
        }
      }
  }
}

void ImplicitGemmConvolution::backward(std::size_t batch, const float* /*in: its phases are kept*/, const float* dout,
                                       const float* weight, float* dweight, float* dbias, float* din) {
  const ConvGeometry& g = geometry_;
  const std::size_t oh = g.out_height(), ow = g.out_width(), patch = g.patch_size(), k2 = g.kernel * g.kernel;
  const std::size_t in_size = g.in_channels * g.in_height * g.in_width, out_size = out_channels_ * oh * ow;
  const std::size_t padded_size = g.in_channels * stride_ * stride_ * phase_plane_;
  if (dbias != nullptr) backend_.sum_channels(batch, out_channels_, oh * ow, dout, dbias);
  if (dweight != nullptr) std::fill(dweight, dweight + out_channels_ * patch, 0.0f);
  if (din != nullptr) {
    float* flipped = flipped_.data();
    if (same_) {
      // The kernel turned by 180°, in and out channels swapped.
      for (std::size_t c = 0; c < g.in_channels; ++c)
        for (std::size_t o = 0; o < out_channels_; ++o)
          for (std::size_t t = 0; t < k2; ++t)
            flipped[(c * out_channels_ + o) * k2 + t] = weight[(o * g.in_channels + c) * k2 + (k2 - 1 - t)];
    } else {
      // Per phase, (in_c, out_c · taps): W[o][c][tap] at [c][o · taps + t].
      for (const Phase& phase : phases_) {
        const std::size_t taps = phase.taps.size();
        for (std::size_t c = 0; c < g.in_channels; ++c)
          for (std::size_t o = 0; o < out_channels_; ++o)
            for (std::size_t t = 0; t < taps; ++t)
              flipped[phase.weight_at + (c * out_channels_ + o) * taps + t] =
                  weight[(o * g.in_channels + c) * k2 + phase.taps[t]];
      }
    }
  }
  // dout on the output grid: position q of channel o is dpadded[o·dout_plane + margin·Wg + margin + q], and
  // the positions between rows fall on zeros, so they add nothing to the sums over q. The weight gradient
  // takes stack_ images at a time, whose dout and phase planes still fit in L2 together.
  const std::size_t dout_size = out_channels_ * dout_plane_;
  const std::size_t reduction = offset_gemm::round_up(positions_, offset_gemm::kReductionStep);
  for (std::size_t first = 0; first < batch; first += stack_) {
    const std::size_t count = std::min(stack_, batch - first);
    for (std::size_t i = 0; i < count; ++i) {
      const float* image_dout = dout + (first + i) * out_size;
      float* dpadded = dpadded_.data() + i * dout_size;
      for (std::size_t o = 0; o < out_channels_; ++o)
        for (std::size_t y = 0; y < oh; ++y)
          std::memcpy(dpadded + o * dout_plane_ + (y + margin_) * width_ + margin_, image_dout + (o * oh + y) * ow,
                      ow * sizeof(float));
    }
    // dW (out_c, patch) += Σ over the stack of dout (out_c, positions) · shifted phase planes (patch, positions)ᵀ
    if (dweight != nullptr)
      offset_gemm::multiply_transposed(offset_gemm::Stack{count, dout_size, padded_size}, out_channels_, reduction,
                                       patch, dpadded_.data() + margin_ * width_ + margin_, dout_plane_,
                                       padded_.data() + first * padded_size, input_offsets_.data(), dweight, patch);
    if (din == nullptr) continue;
    for (std::size_t i = 0; i < count; ++i) {
      const float* dpadded = dpadded_.data() + i * dout_size;
      if (same_) {
        input_gradient_same(dpadded, din + (first + i) * in_size);
      } else {
        input_gradient_phases(dpadded, din + (first + i) * in_size);
      }
    }
  }
}

}  // namespace meridian::models
