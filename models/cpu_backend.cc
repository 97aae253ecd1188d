#include "models/cpu_backend.h"

#include <cblas.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "error/error.h"
#include "models/argmax_max_pooling.h"
#include "models/elementwise_math.h"
#include "models/im2col_convolution.h"
#include "models/implicit_gemm_convolution.h"

namespace meridian::models {

CpuBackend::CpuBackend(int threads) { set_threads(threads); }

void CpuBackend::set_threads(int threads) {
  if (threads < 1) throw error::UserError("CpuBackend: threads must be >= 1, got " + std::to_string(threads));
  threads_ = threads;
  openblas_set_num_threads(threads);
}

namespace {

// Zeroed host memory held in a std::vector<float>, exactly what the layers held before their memory came
// from the backend (same alignment, same zero fill as the pages' first touch). Floats have no padding
// bytes, so the fill zeroes every byte, also of the int32 arrays some layers keep here.
class HostMemory final : public BackendMemory {
 public:
  explicit HostMemory(std::size_t bytes) : bytes_(bytes), block_((bytes + sizeof(float) - 1) / sizeof(float)) {}
  void* data() noexcept override { return block_.empty() ? nullptr : block_.data(); }
  std::size_t bytes() const noexcept override { return bytes_; }

 private:
  std::size_t bytes_;
  std::vector<float> block_;
};

}  // namespace

std::unique_ptr<BackendMemory> CpuBackend::allocate(std::size_t bytes) { return std::make_unique<HostMemory>(bytes); }

void CpuBackend::copy_from_host(void* dst, const void* host, std::size_t bytes) {
  if (bytes > 0) std::memcpy(dst, host, bytes);
}

void CpuBackend::copy_to_host(void* host, const void* src, std::size_t bytes) {
  if (bytes > 0) std::memcpy(host, src, bytes);
}

void CpuBackend::copy(void* dst, const void* src, std::size_t bytes) {
  if (bytes > 0) std::memcpy(dst, src, bytes);
}

// Where the CPU has AVX2 and FMA, convolutions skip im2col's column matrix; elsewhere im2col + OpenBLAS.
std::unique_ptr<Convolution> CpuBackend::make_convolution(const ConvGeometry& g, std::size_t out_channels) {
  if (ImplicitGemmConvolution::supports(g)) return std::make_unique<ImplicitGemmConvolution>(*this, g, out_channels);
  return std::make_unique<Im2colConvolution>(*this, g, out_channels);
}

std::unique_ptr<MaxPooling> CpuBackend::make_max_pooling(const PoolGeometry& g) {
  return std::make_unique<ArgmaxMaxPooling>(*this, g);
}

void CpuBackend::gemm(bool transpose_a, bool transpose_b, std::size_t m, std::size_t n, std::size_t k, float alpha,
                      const float* a, std::size_t lda, const float* b, std::size_t ldb, float beta, float* c,
                      std::size_t ldc) {
  cblas_sgemm(CblasRowMajor, transpose_a ? CblasTrans : CblasNoTrans, transpose_b ? CblasTrans : CblasNoTrans,
              static_cast<blasint>(m), static_cast<blasint>(n), static_cast<blasint>(k), alpha, a,
              static_cast<blasint>(lda), b, static_cast<blasint>(ldb), beta, c, static_cast<blasint>(ldc));
}

namespace {

// The output columns [lo, hi) of one output row whose input column ox·stride + kx − pad falls
// inside the image; outside it the kernel sees zero padding.
struct ValidRange {
  std::size_t lo, hi;
};

inline ValidRange valid_columns(const ConvGeometry& g, std::size_t kx) {
  const std::ptrdiff_t pad = static_cast<std::ptrdiff_t>(g.padding), k = static_cast<std::ptrdiff_t>(kx);
  const std::ptrdiff_t s = static_cast<std::ptrdiff_t>(g.stride), iw = static_cast<std::ptrdiff_t>(g.in_width);
  const std::ptrdiff_t ow = static_cast<std::ptrdiff_t>(g.out_width());
  // smallest ox with ox·s + k − pad >= 0, and one past the largest with ox·s + k − pad < iw
  const std::ptrdiff_t lo = std::max<std::ptrdiff_t>(0, (pad - k + s - 1) / s);
  const std::ptrdiff_t hi = std::clamp<std::ptrdiff_t>((iw + pad - k + s - 1) / s, lo, ow);
  return {static_cast<std::size_t>(std::min(lo, ow)), static_cast<std::size_t>(hi)};
}

// Calls body(width) with the width as a compile-time constant for the row widths of the LeNet-style
// CNN (26-28 for the padded 5x5 convolution over 28 columns, 10 for the second one) and as a run-time
// value otherwise. Rows that short are all loop overhead unless the compiler knows their length.
template <typename Body>
void with_width(std::size_t n, Body&& body) {
  switch (n) {
    case 10: return body(std::integral_constant<std::size_t, 10>{});
    case 26: return body(std::integral_constant<std::size_t, 26>{});
    case 27: return body(std::integral_constant<std::size_t, 27>{});
    case 28: return body(std::integral_constant<std::size_t, 28>{});
    default: return body(n);
  }
}

// Valid column ranges for every kernel column, computed once per call rather than per row.
class ValidRanges {
 public:
  explicit ValidRanges(const ConvGeometry& g) : g_(g) {
    for (std::size_t kx = 0; kx < g.kernel && kx < kCached; ++kx) cached_[kx] = valid_columns(g, kx);
  }
  ValidRange operator[](std::size_t kx) const { return kx < kCached ? cached_[kx] : valid_columns(g_, kx); }

 private:
  static constexpr std::size_t kCached = 16;
  const ConvGeometry& g_;
  ValidRange cached_[kCached] = {};
};

// Σ row[0..n). Eight partial sums let the compiler vectorize the reduction without -ffast-math.
float row_sum(const float* row, std::size_t n) {
  float partial[8] = {};
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (std::size_t j = 0; j < 8; ++j) partial[j] += row[i + j];
  float s = 0.0f;
  for (; i < n; ++i) s += row[i];
  for (float p : partial) s += p;
  return s;
}

}  // namespace

// One row of the column matrix per (channel, ky, kx); inside a row, images follow each other and each
// image's output pixels are row-major. Per output row the padding is a zero prefix and suffix and the
// inside is a straight copy (stride 1) or a strided gather, so there is no bounds test per element.
void CpuBackend::im2col(const ConvGeometry& g, std::size_t batch, const float* images, float* columns) {
  const std::size_t oh = g.out_height(), ow = g.out_width(), k = g.kernel, s = g.stride;
  const std::size_t plane = g.in_height * g.in_width, image_size = g.in_channels * plane;
  const std::ptrdiff_t pad = static_cast<std::ptrdiff_t>(g.padding), ih = static_cast<std::ptrdiff_t>(g.in_height);
  const std::ptrdiff_t iw = static_cast<std::ptrdiff_t>(g.in_width);
  const ValidRanges ranges(g);
  float* out = columns;
  for (std::size_t c = 0; c < g.in_channels; ++c) {
    for (std::size_t ky = 0; ky < k; ++ky) {
      for (std::size_t kx = 0; kx < k; ++kx) {
        const ValidRange valid = ranges[kx];
        const std::ptrdiff_t first_ix = static_cast<std::ptrdiff_t>(valid.lo * s + kx) - pad;
        // The copy length is fixed for the whole (c, ky, kx) row; with_width makes it a constant
        // for the common widths so each copy compiles to a few vector moves.
        with_width(valid.hi - valid.lo, [&](auto width) {
          const std::size_t n = width;
          for (std::size_t b = 0; b < batch; ++b) {
            const float* channel = images + b * image_size + c * plane;
            for (std::size_t oy = 0; oy < oh; ++oy, out += ow) {
              const std::ptrdiff_t iy = static_cast<std::ptrdiff_t>(oy * s + ky) - pad;
              if (iy < 0 || iy >= ih) {
                for (std::size_t ox = 0; ox < ow; ++ox) out[ox] = 0.0f;
                continue;
              }
              const float* in = channel + iy * iw + first_ix;
              for (std::size_t ox = 0; ox < valid.lo; ++ox) out[ox] = 0.0f;
              if (s == 1) {
                for (std::size_t i = 0; i < n; ++i) out[valid.lo + i] = in[i];
              } else {
                for (std::size_t i = 0; i < n; ++i) out[valid.lo + i] = in[i * s];
              }
              for (std::size_t ox = valid.lo + n; ox < ow; ++ox) out[ox] = 0.0f;
            }
          }
        });
      }
    }
  }
}

void CpuBackend::col2im(const ConvGeometry& g, std::size_t batch, const float* columns, float* images) {
  const std::size_t oh = g.out_height(), ow = g.out_width(), k = g.kernel, s = g.stride;
  const std::size_t plane = g.in_height * g.in_width, image_size = g.in_channels * plane;
  const std::ptrdiff_t pad = static_cast<std::ptrdiff_t>(g.padding), ih = static_cast<std::ptrdiff_t>(g.in_height);
  const std::ptrdiff_t iw = static_cast<std::ptrdiff_t>(g.in_width);
  std::fill(images, images + batch * image_size, 0.0f);
  const ValidRanges ranges(g);
  const float* in = columns;
  for (std::size_t c = 0; c < g.in_channels; ++c) {
    for (std::size_t ky = 0; ky < k; ++ky) {
      for (std::size_t kx = 0; kx < k; ++kx) {
        const ValidRange valid = ranges[kx];
        const std::ptrdiff_t first_ix = static_cast<std::ptrdiff_t>(valid.lo * s + kx) - pad;
        with_width(valid.hi - valid.lo, [&](auto width) {
          const std::size_t n = width;
          for (std::size_t b = 0; b < batch; ++b) {
            float* channel = images + b * image_size + c * plane;
            for (std::size_t oy = 0; oy < oh; ++oy, in += ow) {
              const std::ptrdiff_t iy = static_cast<std::ptrdiff_t>(oy * s + ky) - pad;
              if (iy < 0 || iy >= ih) continue;
              float* out = channel + iy * iw + first_ix;
              const float* src = in + valid.lo;
              if (s == 1) {
                for (std::size_t i = 0; i < n; ++i) out[i] += src[i];
              } else {
                for (std::size_t i = 0; i < n; ++i) out[i * s] += src[i];
              }
            }
          }
        });
      }
    }
  }
}

void CpuBackend::sum_channels(std::size_t batch, std::size_t channels, std::size_t pixels, const float* images,
                              float* sums) {
  std::fill(sums, sums + channels, 0.0f);
  for (std::size_t b = 0; b < batch; ++b)
    for (std::size_t c = 0; c < channels; ++c) sums[c] += row_sum(images + (b * channels + c) * pixels, pixels);
}

void CpuBackend::max_pool_forward(const PoolGeometry& g, std::size_t batch, const float* in, float* out,
                                  std::int32_t* argmax) {
  const std::size_t oh = g.out_height(), ow = g.out_width(), plane = g.in_height * g.in_width;
  const bool two_by_two = g.window == 2 && g.stride == 2;
  for (std::size_t p = 0; p < batch * g.channels; ++p) {
    const float* src = in + p * plane;
    for (std::size_t oy = 0; oy < oh; ++oy) {
      if (two_by_two) {
        // The LeNet case, unrolled: the same first-maximum tie rule as the general loop below.
        const std::size_t top = 2 * oy * g.in_width, bottom = top + g.in_width;
        // Written as selects rather than branches: the comparisons are data-dependent coin flips.
        for (std::size_t ox = 0; ox < ow; ++ox) {
          const std::size_t a = top + 2 * ox, b = a + 1, c = bottom + 2 * ox, d = c + 1;
          const std::size_t ab = src[b] > src[a] ? b : a;
          const std::size_t abc = src[c] > src[ab] ? c : ab;
          const std::size_t best = src[d] > src[abc] ? d : abc;
          *out++ = src[best];
          *argmax++ = static_cast<std::int32_t>(best);
        }
        continue;
      }
      for (std::size_t ox = 0; ox < ow; ++ox) {
        std::size_t best = (oy * g.stride) * g.in_width + ox * g.stride;
        for (std::size_t wy = 0; wy < g.window; ++wy) {
          for (std::size_t wx = 0; wx < g.window; ++wx) {
            const std::size_t at = (oy * g.stride + wy) * g.in_width + ox * g.stride + wx;
            if (src[at] > src[best]) best = at;
          }
        }
        *out++ = src[best];
        *argmax++ = static_cast<std::int32_t>(best);
      }
    }
  }
}

void CpuBackend::max_pool_backward(const PoolGeometry& g, std::size_t batch, const float* dout,
                                   const std::int32_t* argmax, float* din) {
  const std::size_t outs = g.out_height() * g.out_width(), plane = g.in_height * g.in_width;
  std::fill(din, din + batch * g.channels * plane, 0.0f);
  for (std::size_t p = 0; p < batch * g.channels; ++p) {
    float* dst = din + p * plane;
    for (std::size_t o = 0; o < outs; ++o) dst[argmax[p * outs + o]] += dout[p * outs + o];
  }
}

void CpuBackend::broadcast_rows(std::size_t rows, std::size_t cols, const float* bias, float* out) {
  for (std::size_t r = 0; r < rows; ++r) std::memcpy(out + r * cols, bias, cols * sizeof(float));
}

void CpuBackend::fill_rows(std::size_t rows, std::size_t cols, const float* values, float* out) {
  for (std::size_t r = 0; r < rows; ++r) std::fill(out + r * cols, out + (r + 1) * cols, values[r]);
}

void CpuBackend::sum(std::size_t rows, std::size_t cols, const float* m, bool over_columns, float* sums) {
  if (over_columns) {
    for (std::size_t r = 0; r < rows; ++r) sums[r] = row_sum(m + r * cols, cols);
    return;
  }
  std::fill(sums, sums + cols, 0.0f);
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t c = 0; c < cols; ++c) sums[c] += m[r * cols + c];
}

// The element-wise loops below copy their pointers into __restrict locals: the buffers never overlap,
// and saying so lets the compiler vectorize instead of checking for aliasing.
void CpuBackend::relu_forward(std::size_t n, const float* in, float* out) {
  const float* __restrict x = in;
  float* __restrict y = out;
  for (std::size_t i = 0; i < n; ++i) y[i] = math::relu(x[i]);
}

void CpuBackend::relu_backward(std::size_t n, const float* out, const float* dout, float* din) {
  const float* __restrict y = out;
  const float* __restrict dy = dout;
  float* __restrict dx = din;
  for (std::size_t i = 0; i < n; ++i) dx[i] = math::relu_backward(y[i], dy[i]);
}

void CpuBackend::activation_forward(Activation f, std::size_t n, const float* in, float* out) {
  const float* __restrict x = in;
  float* __restrict y = out;
  switch (f) {
    case Activation::gelu:
      for (std::size_t i = 0; i < n; ++i) y[i] = math::gelu(x[i]);
      return;
    case Activation::tanh:
      for (std::size_t i = 0; i < n; ++i) y[i] = math::tanh_forward(x[i]);
      return;
    case Activation::sigmoid:
      for (std::size_t i = 0; i < n; ++i) y[i] = math::sigmoid(x[i]);
      return;
  }
}

void CpuBackend::activation_backward(Activation f, std::size_t n, const float* in, const float* out, const float* dout,
                                     float* din) {
  const float* __restrict x = in;
  const float* __restrict y = out;
  const float* __restrict dy = dout;
  float* __restrict dx = din;
  switch (f) {
    case Activation::gelu:
      for (std::size_t i = 0; i < n; ++i) dx[i] = math::gelu_backward(x[i], dy[i]);
      return;
    case Activation::tanh:
      for (std::size_t i = 0; i < n; ++i) dx[i] = math::tanh_backward(y[i], dy[i]);
      return;
    case Activation::sigmoid:
      for (std::size_t i = 0; i < n; ++i) dx[i] = math::sigmoid_backward(y[i], dy[i]);
      return;
  }
}

// Not __restrict: out may be a or b.
void CpuBackend::add(std::size_t n, const float* a, const float* b, float* out) {
  for (std::size_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

namespace {

// Σ (row[i] − mean)² over row[0..n), with the same eight partial sums as row_sum.
float row_squared_deviation(const float* row, std::size_t n, float mean) {
  float partial[8] = {};
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (std::size_t j = 0; j < 8; ++j) {
      const float d = row[i + j] - mean;
      partial[j] += d * d;
    }
  float s = 0.0f;
  for (; i < n; ++i) s += (row[i] - mean) * (row[i] - mean);
  for (float p : partial) s += p;
  return s;
}

// Σ dy and Σ dy·(x − mean) over n values: the two sums every normalization's backward pass needs.
void gradient_sums(const float* x, const float* dy, std::size_t n, float mean, float& sum_dy, float& sum_dy_dx) {
  float a[8] = {}, b[8] = {};
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (std::size_t j = 0; j < 8; ++j) {
      a[j] += dy[i + j];
      b[j] += dy[i + j] * (x[i + j] - mean);
    }
  for (; i < n; ++i) {
    sum_dy += dy[i];
    sum_dy_dx += dy[i] * (x[i] - mean);
  }
  for (std::size_t j = 0; j < 8; ++j) {
    sum_dy += a[j];
    sum_dy_dx += b[j];
  }
}

// y = γ·(x − mean)·inv_std + β over n values, as one multiply-add per element.
void normalize_row(const float* in, std::size_t n, float mean, float inv_std, float gamma, float beta, float* out) {
  const float* __restrict x = in;
  float* __restrict y = out;
  for (std::size_t i = 0; i < n; ++i) y[i] = math::normalize(x[i], mean, inv_std, gamma, beta);
}

// dx over n values from the sums of gradient_sums (see math::normalization_input_gradient); `count` is
// how many values share the statistics.
void normalization_gradient_row(const float* in, const float* dout, std::size_t n, float mean, float inv_std,
                                float gamma, float mean_g, float mean_g_xhat, float* din) {
  const float* __restrict x = in;
  const float* __restrict dy = dout;
  float* __restrict dx = din;
  for (std::size_t i = 0; i < n; ++i)
    dx[i] = math::normalization_input_gradient(gamma * dy[i], (x[i] - mean) * inv_std, inv_std, mean_g, mean_g_xhat);
}

}  // namespace

// Two passes per channel (mean, then the squared deviations from it) rather than Σx and Σx² in one: the
// one-pass variance loses most of its digits when the mean is large next to the spread.
void CpuBackend::batch_norm_forward(const ChannelLayout& l, bool training, const float* in, const float* gamma,
                                    const float* beta, float eps, float momentum, float* running_mean,
                                    float* running_var, float* mean, float* inv_std, float* out) {
  const std::size_t stride = l.channels * l.pixels, count = l.batch * l.pixels;
  for (std::size_t c = 0; c < l.channels; ++c) {
    const float* channel = in + c * l.pixels;
    if (training) {
      float sum = 0.0f;
      for (std::size_t b = 0; b < l.batch; ++b) sum += row_sum(channel + b * stride, l.pixels);
      const float m = sum / static_cast<float>(count);
      float squares = 0.0f;
      for (std::size_t b = 0; b < l.batch; ++b) squares += row_squared_deviation(channel + b * stride, l.pixels, m);
      const float variance = squares / static_cast<float>(count);
      // torch keeps the unbiased variance; a batch of one value has none and keeps the biased one (0).
      const float unbiased = count > 1 ? squares / static_cast<float>(count - 1) : variance;
      running_mean[c] = math::running_update(running_mean[c], m, momentum);
      running_var[c] = math::running_update(running_var[c], unbiased, momentum);
      mean[c] = m;
      inv_std[c] = math::inverse_std(variance, eps);
    } else {
      mean[c] = running_mean[c];
      inv_std[c] = math::inverse_std(running_var[c], eps);
    }
    for (std::size_t b = 0; b < l.batch; ++b)
      normalize_row(channel + b * stride, l.pixels, mean[c], inv_std[c], gamma[c], beta[c],
                    out + b * stride + c * l.pixels);
  }
}

void CpuBackend::batch_norm_backward(const ChannelLayout& l, bool training, const float* in, const float* dout,
                                     const float* gamma, const float* mean, const float* inv_std, float* dgamma,
                                     float* dbeta, float* din) {
  const std::size_t stride = l.channels * l.pixels, count = l.batch * l.pixels;
  for (std::size_t c = 0; c < l.channels; ++c) {
    float sum_dy = 0.0f, sum_dy_dx = 0.0f;
    for (std::size_t b = 0; b < l.batch; ++b) {
      const std::size_t at = b * stride + c * l.pixels;
      gradient_sums(in + at, dout + at, l.pixels, mean[c], sum_dy, sum_dy_dx);
    }
    dbeta[c] = sum_dy;
    dgamma[c] = sum_dy_dx * inv_std[c];
    if (din == nullptr) continue;
    // With running statistics the normalization is a fixed affine map: only its slope remains.
    const float n = static_cast<float>(count);
    const float mean_g = training ? gamma[c] * sum_dy / n : 0.0f;
    const float mean_g_xhat = training ? gamma[c] * dgamma[c] / n : 0.0f;
    for (std::size_t b = 0; b < l.batch; ++b) {
      const std::size_t at = b * stride + c * l.pixels;
      normalization_gradient_row(in + at, dout + at, l.pixels, mean[c], inv_std[c], gamma[c], mean_g, mean_g_xhat,
                                 din + at);
    }
  }
}

// A group's values are contiguous: channels_per_group · pixels values of one sample.
void CpuBackend::group_norm_forward(const ChannelLayout& l, std::size_t groups, const float* in, const float* gamma,
                                    const float* beta, float eps, float* mean, float* inv_std, float* out) {
  const std::size_t per_group = l.channels / groups, count = per_group * l.pixels;
  for (std::size_t b = 0; b < l.batch; ++b) {
    for (std::size_t g = 0; g < groups; ++g) {
      const std::size_t at = (b * l.channels + g * per_group) * l.pixels, s = b * groups + g;
      const float m = row_sum(in + at, count) / static_cast<float>(count);
      mean[s] = m;
      inv_std[s] = math::inverse_std(row_squared_deviation(in + at, count, m) / static_cast<float>(count), eps);
      for (std::size_t k = 0; k < per_group; ++k) {
        const std::size_t c = g * per_group + k, row = at + k * l.pixels;
        normalize_row(in + row, l.pixels, m, inv_std[s], gamma[c], beta[c], out + row);
      }
    }
  }
}

void CpuBackend::group_norm_backward(const ChannelLayout& l, std::size_t groups, const float* in, const float* dout,
                                     const float* gamma, const float* mean, const float* inv_std, float* dgamma,
                                     float* dbeta, float* din) {
  const std::size_t per_group = l.channels / groups;
  const float count = static_cast<float>(per_group * l.pixels);
  std::fill(dgamma, dgamma + l.channels, 0.0f);
  std::fill(dbeta, dbeta + l.channels, 0.0f);
  for (std::size_t b = 0; b < l.batch; ++b) {
    for (std::size_t g = 0; g < groups; ++g) {
      const std::size_t s = b * groups + g;
      // Per channel Σ dy and Σ dy·x̂ feed the parameter gradients; γ-weighted they give the group's means
      // of g = γ·dy and g·x̂ that the input gradient needs.
      float mean_g = 0.0f, mean_g_xhat = 0.0f;
      for (std::size_t k = 0; k < per_group; ++k) {
        const std::size_t c = g * per_group + k, row = (b * l.channels + c) * l.pixels;
        float sum_dy = 0.0f, sum_dy_dx = 0.0f;
        gradient_sums(in + row, dout + row, l.pixels, mean[s], sum_dy, sum_dy_dx);
        dbeta[c] += sum_dy;
        dgamma[c] += sum_dy_dx * inv_std[s];
        mean_g += gamma[c] * sum_dy;
        mean_g_xhat += gamma[c] * sum_dy_dx * inv_std[s];
      }
      if (din == nullptr) continue;
      mean_g /= count;
      mean_g_xhat /= count;
      for (std::size_t k = 0; k < per_group; ++k) {
        const std::size_t c = g * per_group + k, row = (b * l.channels + c) * l.pixels;
        normalization_gradient_row(in + row, dout + row, l.pixels, mean[s], inv_std[s], gamma[c], mean_g, mean_g_xhat,
                                   din + row);
      }
    }
  }
}

void CpuBackend::average_pool_forward(const PoolGeometry& g, std::size_t batch, const float* in, float* out) {
  const std::size_t oh = g.out_height(), ow = g.out_width(), plane = g.in_height * g.in_width;
  const float scale = 1.0f / static_cast<float>(g.window * g.window);
  for (std::size_t p = 0; p < batch * g.channels; ++p) {
    const float* src = in + p * plane;
    for (std::size_t oy = 0; oy < oh; ++oy)
      for (std::size_t ox = 0; ox < ow; ++ox) {
        float sum = 0.0f;
        for (std::size_t wy = 0; wy < g.window; ++wy)
          for (std::size_t wx = 0; wx < g.window; ++wx)
            sum += src[(oy * g.stride + wy) * g.in_width + ox * g.stride + wx];
        *out++ = sum * scale;
      }
  }
}

void CpuBackend::average_pool_backward(const PoolGeometry& g, std::size_t batch, const float* dout, float* din) {
  const std::size_t oh = g.out_height(), ow = g.out_width(), plane = g.in_height * g.in_width;
  const float scale = 1.0f / static_cast<float>(g.window * g.window);
  std::fill(din, din + batch * g.channels * plane, 0.0f);
  for (std::size_t p = 0; p < batch * g.channels; ++p) {
    float* dst = din + p * plane;
    for (std::size_t oy = 0; oy < oh; ++oy)
      for (std::size_t ox = 0; ox < ow; ++ox) {
        const float share = *dout++ * scale;
        for (std::size_t wy = 0; wy < g.window; ++wy)
          for (std::size_t wx = 0; wx < g.window; ++wx)
            dst[(oy * g.stride + wy) * g.in_width + ox * g.stride + wx] += share;
      }
  }
}

void CpuBackend::global_average_pool_forward(const ChannelLayout& l, const float* in, float* out) {
  const float scale = 1.0f / static_cast<float>(l.pixels);
  for (std::size_t r = 0; r < l.batch * l.channels; ++r) out[r] = row_sum(in + r * l.pixels, l.pixels) * scale;
}

void CpuBackend::global_average_pool_backward(const ChannelLayout& l, const float* dout, float* din) {
  const float scale = 1.0f / static_cast<float>(l.pixels);
  for (std::size_t r = 0; r < l.batch * l.channels; ++r)
    std::fill(din + r * l.pixels, din + (r + 1) * l.pixels, dout[r] * scale);
}

void CpuBackend::dropout_forward(std::size_t n, float p, std::uint64_t key, const float* in, float* out) {
  const float scale = 1.0f / (1.0f - p);
  const float* __restrict x = in;
  float* __restrict y = out;
  for (std::size_t i = 0; i < n; ++i) y[i] = math::dropout(x[i], math::dropout_keep(key, i, p), scale);
}

void CpuBackend::dropout_backward(std::size_t n, float p, std::uint64_t key, const float* dout, float* din) {
  dropout_forward(n, p, key, dout, din);  // the same mask and scale: dropout is linear in its input
}

float CpuBackend::softmax_cross_entropy(std::size_t batch, std::size_t classes, const float* logits,
                                        const std::int32_t* labels, float* dlogits) {
  const float scale = 1.0f / static_cast<float>(batch);
  double total = 0.0;
  for (std::size_t b = 0; b < batch; ++b) {
    if (labels[b] < 0 || static_cast<std::size_t>(labels[b]) >= classes)
      throw error::UserError("softmax_cross_entropy: label " + std::to_string(labels[b]) + " of sample " +
                             std::to_string(b) + " is outside [0, " + std::to_string(classes) + ")");
    total += math::softmax_cross_entropy_row(logits + b * classes, static_cast<int>(classes), labels[b], scale,
                                             dlogits + b * classes);
  }
  return static_cast<float>(total / static_cast<double>(batch));
}

void CpuBackend::argmax_rows(std::size_t batch, std::size_t classes, const float* logits, std::int32_t* predictions) {
  for (std::size_t b = 0; b < batch; ++b) {
    const float* row = logits + b * classes;
    predictions[b] = static_cast<std::int32_t>(std::max_element(row, row + classes) - row);
  }
}

void CpuBackend::sgd_update(std::size_t n, float* w, const float* g, float lr, float weight_decay) {
  float* __restrict wr = w;
  const float* __restrict gr = g;
  for (std::size_t i = 0; i < n; ++i) math::sgd_update(wr[i], gr[i], lr, weight_decay);
}

void CpuBackend::momentum_update(std::size_t n, float* w, float* u, const float* g, float lr, float momentum,
                                 float weight_decay, bool nesterov) {
  float* __restrict wr = w;
  float* __restrict ur = u;
  const float* __restrict gr = g;
  // Two loops so the compiler vectorizes each without a per-element branch on `nesterov`.
  if (nesterov) {
    for (std::size_t i = 0; i < n; ++i) math::momentum_update(wr[i], ur[i], gr[i], lr, momentum, weight_decay, true);
  } else {
    for (std::size_t i = 0; i < n; ++i) math::momentum_update(wr[i], ur[i], gr[i], lr, momentum, weight_decay, false);
  }
}

void CpuBackend::adam_update(std::size_t n, float* w, float* m, float* v, const float* g, float lr, float beta1,
                             float beta2, float eps, float weight_decay, float bias_correction1,
                             float bias_correction2) {
  float* __restrict wr = w;
  float* __restrict mr = m;
  float* __restrict vr = v;
  const float* __restrict gr = g;
  for (std::size_t i = 0; i < n; ++i)
    math::adam_update(wr[i], mr[i], vr[i], gr[i], lr, beta1, beta2, eps, weight_decay, bias_correction1,
                      bias_correction2);
}

void CpuBackend::push_sum_scale(std::size_t n, float* x, float share) {
  for (std::size_t i = 0; i < n; ++i) math::push_sum_scale(x[i], share);
}

void CpuBackend::push_sum_add(std::size_t n, float* x, const float* received) {
  for (std::size_t i = 0; i < n; ++i) math::push_sum_add(x[i], received[i]);
}

void CpuBackend::delayed_compensation(std::size_t n, float* x, const float* mixed, const float* snapshot) {
  for (std::size_t i = 0; i < n; ++i) math::delayed_compensation(x[i], mixed[i], snapshot[i]);
}

}  // namespace meridian::models
