// All kernels of the CUDA backend live in this one translation unit: each .cu file is compiled once per
// GPU architecture, so few files keep the build short. Indexing uses 64-bit sizes throughout; a launch
// covers any n with a grid-stride loop.
#include "cuda/kernels.h"

#include <algorithm>

#include "cuda/error.h"
#include "models/elementwise_math.h"

namespace meridian::cuda::kernels {

namespace {

namespace math = models::math;

constexpr int kThreads = 256;

// Enough blocks to fill the device for large n without launching millions of them; the grid-stride loops
// in the kernels cover the rest.
unsigned blocks_for(std::size_t n) {
  const std::size_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(std::clamp<std::size_t>(blocks, 1, 65535));
}

// The geometries of models/backend.h with their derived sizes computed on the host (their member
// functions are host code).
struct ConvDims {
  std::size_t in_channels, in_height, in_width, kernel, stride, padding, out_height, out_width;
  __host__ __device__ std::size_t patch_size() const { return in_channels * kernel * kernel; }
};
struct PoolDims {
  std::size_t channels, in_height, in_width, window, stride, out_height, out_width;
};

ConvDims dims(const models::ConvGeometry& g) {
  return {g.in_channels, g.in_height, g.in_width, g.kernel, g.stride, g.padding, g.out_height(), g.out_width()};
}
PoolDims dims(const models::PoolGeometry& g) {
  return {g.channels, g.in_height, g.in_width, g.window, g.stride, g.out_height(), g.out_width()};
}

#define MERIDIAN_GRID_STRIDE(i, n)                                                  \
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < (n); \
       i += std::size_t{gridDim.x} * blockDim.x)

__global__ void im2col_kernel(ConvDims g, std::size_t batch, const float* images, float* columns) {
  const std::size_t oh = g.out_height, ow = g.out_width, k = g.kernel;
  const std::size_t per_row = batch * oh * ow;  // one column-matrix row per (channel, ky, kx)
  const std::size_t total = g.patch_size() * per_row;
  const long long ih = static_cast<long long>(g.in_height), iw = static_cast<long long>(g.in_width);
  MERIDIAN_GRID_STRIDE(i, total) {
    const std::size_t row = i / per_row, col = i % per_row;
    const std::size_t c = row / (k * k), ky = (row / k) % k, kx = row % k;
    const std::size_t b = col / (oh * ow), oy = (col / ow) % oh, ox = col % ow;
    const long long iy = static_cast<long long>(oy * g.stride + ky) - static_cast<long long>(g.padding);
    const long long ix = static_cast<long long>(ox * g.stride + kx) - static_cast<long long>(g.padding);
    const bool inside = iy >= 0 && iy < ih && ix >= 0 && ix < iw;
    columns[i] = inside ? images[((b * g.in_channels + c) * g.in_height + iy) * g.in_width + ix] : 0.0f;
  }
}

// One thread per image pixel gathers every column entry that im2col copied from it, in the (ky, kx)
// order the CPU backend adds them: no atomics, and the same rounding as the CPU.
__global__ void col2im_kernel(ConvDims g, std::size_t batch, const float* columns, float* images) {
  const std::size_t oh = g.out_height, ow = g.out_width, k = g.kernel, s = g.stride;
  const std::size_t per_row = batch * oh * ow;
  const std::size_t total = batch * g.in_channels * g.in_height * g.in_width;
  MERIDIAN_GRID_STRIDE(i, total) {
    const std::size_t ix = i % g.in_width, iy = (i / g.in_width) % g.in_height;
    const std::size_t c = (i / (g.in_width * g.in_height)) % g.in_channels,
                      b = i / (g.in_width * g.in_height * g.in_channels);
    float acc = 0.0f;
    for (std::size_t ky = 0; ky < k; ++ky) {
      const long long ny = static_cast<long long>(iy + g.padding) - static_cast<long long>(ky);
      if (ny < 0 || ny % static_cast<long long>(s) != 0 || ny / static_cast<long long>(s) >= static_cast<long long>(oh))
        continue;
      const std::size_t oy = static_cast<std::size_t>(ny) / s;
      for (std::size_t kx = 0; kx < k; ++kx) {
        const long long nx = static_cast<long long>(ix + g.padding) - static_cast<long long>(kx);
        if (nx < 0 || nx % static_cast<long long>(s) != 0 ||
            nx / static_cast<long long>(s) >= static_cast<long long>(ow))
          continue;
        const std::size_t ox = static_cast<std::size_t>(nx) / s;
        const std::size_t row = (c * k + ky) * k + kx;
        acc += columns[row * per_row + (b * oh + oy) * ow + ox];
      }
    }
    images[i] = acc;
  }
}

// Conv bias gradient: one block per channel sums its pixels over all images, strided partial sums then a
// tree in shared memory (fixed order: the same result on every run).
__global__ void sum_channels_kernel(std::size_t batch, std::size_t channels, std::size_t pixels, const float* images,
                                    float* sums) {
  __shared__ float partial[kThreads];
  for (std::size_t c = blockIdx.x; c < channels; c += gridDim.x) {
    float acc = 0.0f;
    for (std::size_t i = threadIdx.x; i < batch * pixels; i += blockDim.x) {
      const std::size_t b = i / pixels, p = i % pixels;
      acc += images[(b * channels + c) * pixels + p];
    }
    partial[threadIdx.x] = acc;
    __syncthreads();
    for (unsigned half = blockDim.x / 2; half > 0; half /= 2) {
      if (threadIdx.x < half) partial[threadIdx.x] += partial[threadIdx.x + half];
      __syncthreads();
    }
    if (threadIdx.x == 0) sums[c] = partial[0];
    __syncthreads();
  }
}

__global__ void max_pool_forward_kernel(PoolDims g, std::size_t batch, const float* in, float* out,
                                        std::int32_t* argmax) {
  const std::size_t oh = g.out_height, ow = g.out_width, plane = g.in_height * g.in_width;
  MERIDIAN_GRID_STRIDE(i, batch * g.channels * oh * ow) {
    const std::size_t ox = i % ow, oy = (i / ow) % oh, p = i / (ow * oh);
    const float* src = in + p * plane;
    // Strict '>' from the window's first element: ties go to the first maximum, as on the CPU.
    std::size_t best = (oy * g.stride) * g.in_width + ox * g.stride;
    for (std::size_t wy = 0; wy < g.window; ++wy) {
      for (std::size_t wx = 0; wx < g.window; ++wx) {
        const std::size_t at = (oy * g.stride + wy) * g.in_width + ox * g.stride + wx;
        if (src[at] > src[best]) best = at;
      }
    }
    out[i] = src[best];
    argmax[i] = static_cast<std::int32_t>(best);
  }
}

// One thread per input pixel gathers the outputs whose window chose it, in ascending output order (the
// CPU's scatter order), so overlapping windows (stride < window) need no atomics.
__global__ void max_pool_backward_kernel(PoolDims g, std::size_t batch, const float* dout, const std::int32_t* argmax,
                                         float* din) {
  const std::size_t oh = g.out_height, ow = g.out_width, plane = g.in_height * g.in_width;
  MERIDIAN_GRID_STRIDE(i, batch * g.channels * plane) {
    const std::size_t at = i % plane, p = i / plane, iy = at / g.in_width, ix = at % g.in_width;
    // Outputs whose window covers (iy, ix): oy·stride ≤ iy < oy·stride + window.
    const std::size_t oy_first = iy + 1 > g.window ? (iy + 1 - g.window + g.stride - 1) / g.stride : 0;
    const std::size_t ox_first = ix + 1 > g.window ? (ix + 1 - g.window + g.stride - 1) / g.stride : 0;
    float acc = 0.0f;
    for (std::size_t oy = oy_first; oy < oh && oy * g.stride <= iy; ++oy) {
      for (std::size_t ox = ox_first; ox < ow && ox * g.stride <= ix; ++ox) {
        const std::size_t o = (p * oh + oy) * ow + ox;
        if (static_cast<std::size_t>(argmax[o]) == at) acc += dout[o];
      }
    }
    din[i] = acc;
  }
}

__global__ void broadcast_rows_kernel(std::size_t rows, std::size_t cols, const float* bias, float* out) {
  MERIDIAN_GRID_STRIDE(i, rows * cols) out[i] = bias[i % cols];
}

__global__ void fill_rows_kernel(std::size_t rows, std::size_t cols, const float* values, float* out) {
  MERIDIAN_GRID_STRIDE(i, rows * cols) out[i] = values[i / cols];
}

// Row sums: one block per row, each thread a strided partial sum, then a tree in shared memory. Fixed
// order, so the result is the same on every run (it differs from the CPU's sequential sum by rounding).
__global__ void row_sums_kernel(std::size_t rows, std::size_t cols, const float* m, float* sums) {
  __shared__ float partial[kThreads];
  for (std::size_t r = blockIdx.x; r < rows; r += gridDim.x) {
    float acc = 0.0f;
    for (std::size_t c = threadIdx.x; c < cols; c += blockDim.x) acc += m[r * cols + c];
    partial[threadIdx.x] = acc;
    __syncthreads();
    for (unsigned half = blockDim.x / 2; half > 0; half /= 2) {
      if (threadIdx.x < half) partial[threadIdx.x] += partial[threadIdx.x + half];
      __syncthreads();
    }
    if (threadIdx.x == 0) sums[r] = partial[0];
    __syncthreads();
  }
}

// Column sums: one thread per column adds the rows in order, exactly as the CPU does.
__global__ void column_sums_kernel(std::size_t rows, std::size_t cols, const float* m, float* sums) {
  MERIDIAN_GRID_STRIDE(c, cols) {
    float acc = 0.0f;
    for (std::size_t r = 0; r < rows; ++r) acc += m[r * cols + c];
    sums[c] = acc;
  }
}

__global__ void relu_forward_kernel(std::size_t n, const float* in, float* out) {
  MERIDIAN_GRID_STRIDE(i, n) out[i] = math::relu(in[i]);
}

__global__ void relu_backward_kernel(std::size_t n, const float* out, const float* dout, float* din) {
  MERIDIAN_GRID_STRIDE(i, n) din[i] = math::relu_backward(out[i], dout[i]);
}

__global__ void softmax_cross_entropy_kernel(std::size_t batch, std::size_t classes, const float* logits,
                                             const std::int32_t* labels, float* dlogits, float* row_losses,
                                             unsigned long long* first_bad_row) {
  const float scale = 1.0f / static_cast<float>(batch);
  MERIDIAN_GRID_STRIDE(b, batch) {
    const std::int32_t label = labels[b];
    if (label < 0 || static_cast<std::size_t>(label) >= classes) {
      row_losses[b] = __int_as_float(0x7fc00000);  // NaN
      atomicMin(first_bad_row, static_cast<unsigned long long>(b));
      continue;
    }
    row_losses[b] = math::softmax_cross_entropy_row(logits + b * classes, static_cast<int>(classes), label, scale,
                                                    dlogits + b * classes);
  }
}

__global__ void argmax_rows_kernel(std::size_t batch, std::size_t classes, const float* logits,
                                   std::int32_t* predictions) {
  MERIDIAN_GRID_STRIDE(b, batch) {
    const float* row = logits + b * classes;
    std::size_t best = 0;
    for (std::size_t c = 1; c < classes; ++c) {
      if (row[c] > row[best]) best = c;  // first maximum, as std::max_element
    }
    predictions[b] = static_cast<std::int32_t>(best);
  }
}

__global__ void sgd_kernel(std::size_t n, float* w, const float* g, float lr, float weight_decay) {
  MERIDIAN_GRID_STRIDE(i, n) math::sgd_update(w[i], g[i], lr, weight_decay);
}

__global__ void momentum_kernel(std::size_t n, float* w, float* u, const float* g, float lr, float momentum,
                                float weight_decay, bool nesterov) {
  MERIDIAN_GRID_STRIDE(i, n) math::momentum_update(w[i], u[i], g[i], lr, momentum, weight_decay, nesterov);
}

__global__ void adam_kernel(std::size_t n, float* w, float* m, float* v, const float* g, float lr, float beta1,
                            float beta2, float eps, float weight_decay, float bias_correction1,
                            float bias_correction2) {
  MERIDIAN_GRID_STRIDE(i, n) {
    math::adam_update(w[i], m[i], v[i], g[i], lr, beta1, beta2, eps, weight_decay, bias_correction1, bias_correction2);
  }
}

__global__ void push_sum_scale_kernel(std::size_t n, float* x, float share) {
  MERIDIAN_GRID_STRIDE(i, n) math::push_sum_scale(x[i], share);
}

__global__ void push_sum_add_kernel(std::size_t n, float* x, const float* received) {
  MERIDIAN_GRID_STRIDE(i, n) math::push_sum_add(x[i], received[i]);
}

__global__ void delayed_compensation_kernel(std::size_t n, float* x, const float* mixed, const float* snapshot) {
  MERIDIAN_GRID_STRIDE(i, n) math::delayed_compensation(x[i], mixed[i], snapshot[i]);
}

__global__ void activation_forward_kernel(models::Activation f, std::size_t n, const float* in, float* out) {
  MERIDIAN_GRID_STRIDE(i, n) {
    switch (f) {
      case models::Activation::gelu: out[i] = math::gelu(in[i]); break;
      case models::Activation::tanh: out[i] = math::tanh_forward(in[i]); break;
      case models::Activation::sigmoid: out[i] = math::sigmoid(in[i]); break;
    }
  }
}

__global__ void activation_backward_kernel(models::Activation f, std::size_t n, const float* in, const float* out,
                                           const float* dout, float* din) {
  MERIDIAN_GRID_STRIDE(i, n) {
    switch (f) {
      case models::Activation::gelu: din[i] = math::gelu_backward(in[i], dout[i]); break;
      case models::Activation::tanh: din[i] = math::tanh_backward(out[i], dout[i]); break;
      case models::Activation::sigmoid: din[i] = math::sigmoid_backward(out[i], dout[i]); break;
    }
  }
}

__global__ void add_kernel(std::size_t n, const float* a, const float* b, float* out) {
  MERIDIAN_GRID_STRIDE(i, n) out[i] = a[i] + b[i];
}

// The sum of every thread's `value` over the block (blockDim.x == kThreads), returned to all threads, in a
// fixed tree order. `partial` is the block's shared scratch of kThreads floats.
__device__ float block_sum(float value, float* partial) {
  partial[threadIdx.x] = value;
  __syncthreads();
  for (unsigned half = blockDim.x / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) partial[threadIdx.x] += partial[threadIdx.x + half];
    __syncthreads();
  }
  const float total = partial[0];
  __syncthreads();
  return total;
}

// One block per channel: its statistics (the batch's, or the running ones), then its normalized values.
__global__ void batch_norm_forward_kernel(std::size_t batch, std::size_t channels, std::size_t pixels, bool training,
                                          const float* in, const float* gamma, const float* beta, float eps,
                                          float momentum, float* running_mean, float* running_var, float* mean,
                                          float* inv_std, float* out) {
  __shared__ float partial[kThreads];
  const std::size_t count = batch * pixels;
  for (std::size_t c = blockIdx.x; c < channels; c += gridDim.x) {
    float m, s;
    if (training) {
      float acc = 0.0f;
      for (std::size_t i = threadIdx.x; i < count; i += blockDim.x)
        acc += in[((i / pixels) * channels + c) * pixels + i % pixels];
      m = block_sum(acc, partial) / static_cast<float>(count);
      acc = 0.0f;
      for (std::size_t i = threadIdx.x; i < count; i += blockDim.x) {
        const float d = in[((i / pixels) * channels + c) * pixels + i % pixels] - m;
        acc += d * d;
      }
      const float squares = block_sum(acc, partial);
      const float variance = squares / static_cast<float>(count);
      const float unbiased = count > 1 ? squares / static_cast<float>(count - 1) : variance;
      s = math::inverse_std(variance, eps);
      if (threadIdx.x == 0) {
        running_mean[c] = math::running_update(running_mean[c], m, momentum);
        running_var[c] = math::running_update(running_var[c], unbiased, momentum);
      }
    } else {
      m = running_mean[c];
      s = math::inverse_std(running_var[c], eps);
    }
    if (threadIdx.x == 0) {
      mean[c] = m;
      inv_std[c] = s;
    }
    for (std::size_t i = threadIdx.x; i < count; i += blockDim.x) {
      const std::size_t at = ((i / pixels) * channels + c) * pixels + i % pixels;
      out[at] = math::normalize(in[at], m, s, gamma[c], beta[c]);
    }
  }
}

// One block per channel: the parameter gradients, then the input gradient.
__global__ void batch_norm_backward_kernel(std::size_t batch, std::size_t channels, std::size_t pixels, bool training,
                                           const float* in, const float* dout, const float* gamma, const float* mean,
                                           const float* inv_std, float* dgamma, float* dbeta, float* din) {
  __shared__ float partial[kThreads];
  const std::size_t count = batch * pixels;
  for (std::size_t c = blockIdx.x; c < channels; c += gridDim.x) {
    float a = 0.0f, b = 0.0f;
    for (std::size_t i = threadIdx.x; i < count; i += blockDim.x) {
      const std::size_t at = ((i / pixels) * channels + c) * pixels + i % pixels;
      a += dout[at];
      b += dout[at] * (in[at] - mean[c]);
    }
    const float sum_dy = block_sum(a, partial);
    const float dg = block_sum(b, partial) * inv_std[c];
    if (threadIdx.x == 0) {
      dbeta[c] = sum_dy;
      dgamma[c] = dg;
    }
    if (din == nullptr) continue;
    const float n = static_cast<float>(count);
    const float mean_g = training ? gamma[c] * sum_dy / n : 0.0f;
    const float mean_g_xhat = training ? gamma[c] * dg / n : 0.0f;
    for (std::size_t i = threadIdx.x; i < count; i += blockDim.x) {
      const std::size_t at = ((i / pixels) * channels + c) * pixels + i % pixels;
      din[at] = math::normalization_input_gradient(gamma[c] * dout[at], (in[at] - mean[c]) * inv_std[c], inv_std[c],
                                                   mean_g, mean_g_xhat);
    }
  }
}

// One block per (sample, group): its statistics, then its normalized values (a group is contiguous).
__global__ void group_norm_forward_kernel(std::size_t batch, std::size_t channels, std::size_t pixels,
                                          std::size_t groups, const float* in, const float* gamma, const float* beta,
                                          float eps, float* mean, float* inv_std, float* out) {
  __shared__ float partial[kThreads];
  const std::size_t per_group = channels / groups, count = per_group * pixels;
  for (std::size_t s = blockIdx.x; s < batch * groups; s += gridDim.x) {
    const float* x = in + s * count;
    float acc = 0.0f;
    for (std::size_t i = threadIdx.x; i < count; i += blockDim.x) acc += x[i];
    const float m = block_sum(acc, partial) / static_cast<float>(count);
    acc = 0.0f;
    for (std::size_t i = threadIdx.x; i < count; i += blockDim.x) acc += (x[i] - m) * (x[i] - m);
    const float r = math::inverse_std(block_sum(acc, partial) / static_cast<float>(count), eps);
    if (threadIdx.x == 0) {
      mean[s] = m;
      inv_std[s] = r;
    }
    const std::size_t first_channel = (s % groups) * per_group;
    for (std::size_t i = threadIdx.x; i < count; i += blockDim.x) {
      const std::size_t c = first_channel + i / pixels;
      out[s * count + i] = math::normalize(x[i], m, r, gamma[c], beta[c]);
    }
  }
}

// One block per channel: Σ dy and Σ dy·x̂ over the batch, each sample with its group's statistics.
__global__ void group_norm_parameter_grad_kernel(std::size_t batch, std::size_t channels, std::size_t pixels,
                                                 std::size_t groups, const float* in, const float* dout,
                                                 const float* mean, const float* inv_std, float* dgamma, float* dbeta) {
  __shared__ float partial[kThreads];
  const std::size_t per_group = channels / groups;
  for (std::size_t c = blockIdx.x; c < channels; c += gridDim.x) {
    float a = 0.0f, b = 0.0f;
    for (std::size_t i = threadIdx.x; i < batch * pixels; i += blockDim.x) {
      const std::size_t sample = i / pixels, at = (sample * channels + c) * pixels + i % pixels;
      const std::size_t s = sample * groups + c / per_group;
      a += dout[at];
      b += dout[at] * (in[at] - mean[s]) * inv_std[s];
    }
    const float sum_dy = block_sum(a, partial), sum_dy_xhat = block_sum(b, partial);
    if (threadIdx.x == 0) {
      dbeta[c] = sum_dy;
      dgamma[c] = sum_dy_xhat;
    }
  }
}

// One block per (sample, group): the means of g = γ·dy and g·x̂, then the group's input gradient.
__global__ void group_norm_input_grad_kernel(std::size_t batch, std::size_t channels, std::size_t pixels,
                                             std::size_t groups, const float* in, const float* dout, const float* gamma,
                                             const float* mean, const float* inv_std, float* din) {
  __shared__ float partial[kThreads];
  const std::size_t per_group = channels / groups, count = per_group * pixels;
  for (std::size_t s = blockIdx.x; s < batch * groups; s += gridDim.x) {
    const std::size_t first_channel = (s % groups) * per_group;
    const float* x = in + s * count;
    const float* dy = dout + s * count;
    float a = 0.0f, b = 0.0f;
    for (std::size_t i = threadIdx.x; i < count; i += blockDim.x) {
      const float g = gamma[first_channel + i / pixels] * dy[i];
      a += g;
      b += g * (x[i] - mean[s]) * inv_std[s];
    }
    const float mean_g = block_sum(a, partial) / static_cast<float>(count);
    const float mean_g_xhat = block_sum(b, partial) / static_cast<float>(count);
    for (std::size_t i = threadIdx.x; i < count; i += blockDim.x) {
      const float g = gamma[first_channel + i / pixels] * dy[i];
      din[s * count + i] =
          math::normalization_input_gradient(g, (x[i] - mean[s]) * inv_std[s], inv_std[s], mean_g, mean_g_xhat);
    }
  }
}

__global__ void average_pool_forward_kernel(PoolDims g, std::size_t batch, const float* in, float* out) {
  const std::size_t oh = g.out_height, ow = g.out_width, plane = g.in_height * g.in_width;
  const float scale = 1.0f / static_cast<float>(g.window * g.window);
  MERIDIAN_GRID_STRIDE(i, batch * g.channels * oh * ow) {
    const std::size_t ox = i % ow, oy = (i / ow) % oh, p = i / (ow * oh);
    const float* src = in + p * plane;
    float sum = 0.0f;
    for (std::size_t wy = 0; wy < g.window; ++wy)
      for (std::size_t wx = 0; wx < g.window; ++wx) sum += src[(oy * g.stride + wy) * g.in_width + ox * g.stride + wx];
    out[i] = sum * scale;
  }
}

// One thread per input pixel gathers the share of every window that covers it: no atomics.
__global__ void average_pool_backward_kernel(PoolDims g, std::size_t batch, const float* dout, float* din) {
  const std::size_t oh = g.out_height, ow = g.out_width;
  const float scale = 1.0f / static_cast<float>(g.window * g.window);
  MERIDIAN_GRID_STRIDE(i, batch * g.channels * g.in_height * g.in_width) {
    const std::size_t ix = i % g.in_width, iy = (i / g.in_width) % g.in_height, p = i / (g.in_width * g.in_height);
    // Windows oy cover iy when oy·stride <= iy < oy·stride + window.
    const std::size_t oy_lo = iy + 1 > g.window ? (iy + 1 - g.window + g.stride - 1) / g.stride : 0;
    const std::size_t ox_lo = ix + 1 > g.window ? (ix + 1 - g.window + g.stride - 1) / g.stride : 0;
    float sum = 0.0f;
    for (std::size_t oy = oy_lo; oy < oh && oy * g.stride <= iy; ++oy)
      for (std::size_t ox = ox_lo; ox < ow && ox * g.stride <= ix; ++ox) sum += dout[(p * oh + oy) * ow + ox];
    din[i] = sum * scale;
  }
}

__global__ void global_average_pool_forward_kernel(std::size_t rows, std::size_t pixels, const float* in, float* out) {
  const float scale = 1.0f / static_cast<float>(pixels);
  MERIDIAN_GRID_STRIDE(r, rows) {
    float sum = 0.0f;
    for (std::size_t p = 0; p < pixels; ++p) sum += in[r * pixels + p];
    out[r] = sum * scale;
  }
}

__global__ void global_average_pool_backward_kernel(std::size_t rows, std::size_t pixels, const float* dout,
                                                    float* din) {
  const float scale = 1.0f / static_cast<float>(pixels);
  MERIDIAN_GRID_STRIDE(i, rows * pixels) din[i] = dout[i / pixels] * scale;
}

__global__ void dropout_kernel(std::size_t n, float p, std::uint64_t key, const float* in, float* out) {
  const float scale = 1.0f / (1.0f - p);
  MERIDIAN_GRID_STRIDE(i, n) out[i] = math::dropout(in[i], math::dropout_keep(key, i, p), scale);
}

#undef MERIDIAN_GRID_STRIDE

}  // namespace

// Each launcher skips empty work (a zero-sized grid is a launch error) and checks the launch.
#define MERIDIAN_LAUNCH(kernel, n, stream, ...)                    \
  do {                                                             \
    if ((n) == 0) return;                                          \
    kernel<<<blocks_for(n), kThreads, 0, (stream)>>>(__VA_ARGS__); \
    MERIDIAN_CUDA_CHECK_LAUNCH();                                  \
  } while (false)

void im2col(cudaStream_t stream, const models::ConvGeometry& g, std::size_t batch, const float* images,
            float* columns) {
  MERIDIAN_LAUNCH(im2col_kernel, g.patch_size() * batch * g.out_height() * g.out_width(), stream, dims(g), batch,
                  images, columns);
}

void col2im(cudaStream_t stream, const models::ConvGeometry& g, std::size_t batch, const float* columns,
            float* images) {
  MERIDIAN_LAUNCH(col2im_kernel, batch * g.in_channels * g.in_height * g.in_width, stream, dims(g), batch, columns,
                  images);
}

void sum_channels(cudaStream_t stream, std::size_t batch, std::size_t channels, std::size_t pixels, const float* images,
                  float* sums) {
  if (channels == 0) return;
  if (batch * pixels == 0) {
    MERIDIAN_CUDA_CHECK(cudaMemsetAsync(sums, 0, channels * sizeof(float), stream));
    return;
  }
  sum_channels_kernel<<<static_cast<unsigned>(std::min<std::size_t>(channels, 65535)), kThreads, 0, stream>>>(
      batch, channels, pixels, images, sums);
  MERIDIAN_CUDA_CHECK_LAUNCH();
}

void max_pool_forward(cudaStream_t stream, const models::PoolGeometry& g, std::size_t batch, const float* in,
                      float* out, std::int32_t* argmax) {
  MERIDIAN_LAUNCH(max_pool_forward_kernel, batch * g.channels * g.out_height() * g.out_width(), stream, dims(g), batch,
                  in, out, argmax);
}

void max_pool_backward(cudaStream_t stream, const models::PoolGeometry& g, std::size_t batch, const float* dout,
                       const std::int32_t* argmax, float* din) {
  MERIDIAN_LAUNCH(max_pool_backward_kernel, batch * g.channels * g.in_height * g.in_width, stream, dims(g), batch, dout,
                  argmax, din);
}

void broadcast_rows(cudaStream_t stream, std::size_t rows, std::size_t cols, const float* bias, float* out) {
  MERIDIAN_LAUNCH(broadcast_rows_kernel, rows * cols, stream, rows, cols, bias, out);
}

void fill_rows(cudaStream_t stream, std::size_t rows, std::size_t cols, const float* values, float* out) {
  MERIDIAN_LAUNCH(fill_rows_kernel, rows * cols, stream, rows, cols, values, out);
}

void sum(cudaStream_t stream, std::size_t rows, std::size_t cols, const float* m, bool over_columns, float* sums) {
  if (over_columns) {
    if (rows == 0) return;
    if (cols == 0) {
      MERIDIAN_CUDA_CHECK(cudaMemsetAsync(sums, 0, rows * sizeof(float), stream));
      return;
    }
    row_sums_kernel<<<static_cast<unsigned>(std::min<std::size_t>(rows, 65535)), kThreads, 0, stream>>>(rows, cols, m,
                                                                                                        sums);
    MERIDIAN_CUDA_CHECK_LAUNCH();
    return;
  }
  MERIDIAN_LAUNCH(column_sums_kernel, cols, stream, rows, cols, m, sums);
}

void relu_forward(cudaStream_t stream, std::size_t n, const float* in, float* out) {
  MERIDIAN_LAUNCH(relu_forward_kernel, n, stream, n, in, out);
}

void relu_backward(cudaStream_t stream, std::size_t n, const float* out, const float* dout, float* din) {
  MERIDIAN_LAUNCH(relu_backward_kernel, n, stream, n, out, dout, din);
}

void softmax_cross_entropy(cudaStream_t stream, std::size_t batch, std::size_t classes, const float* logits,
                           const std::int32_t* labels, float* dlogits, float* row_losses,
                           unsigned long long* first_bad_row) {
  MERIDIAN_LAUNCH(softmax_cross_entropy_kernel, batch, stream, batch, classes, logits, labels, dlogits, row_losses,
                  first_bad_row);
}

void argmax_rows(cudaStream_t stream, std::size_t batch, std::size_t classes, const float* logits,
                 std::int32_t* predictions) {
  MERIDIAN_LAUNCH(argmax_rows_kernel, batch, stream, batch, classes, logits, predictions);
}

void sgd_update(cudaStream_t stream, std::size_t n, float* w, const float* g, float lr, float weight_decay) {
  MERIDIAN_LAUNCH(sgd_kernel, n, stream, n, w, g, lr, weight_decay);
}

void momentum_update(cudaStream_t stream, std::size_t n, float* w, float* u, const float* g, float lr, float momentum,
                     float weight_decay, bool nesterov) {
  MERIDIAN_LAUNCH(momentum_kernel, n, stream, n, w, u, g, lr, momentum, weight_decay, nesterov);
}

void adam_update(cudaStream_t stream, std::size_t n, float* w, float* m, float* v, const float* g, float lr,
                 float beta1, float beta2, float eps, float weight_decay, float bias_correction1,
                 float bias_correction2) {
  MERIDIAN_LAUNCH(adam_kernel, n, stream, n, w, m, v, g, lr, beta1, beta2, eps, weight_decay, bias_correction1,
                  bias_correction2);
}

void push_sum_scale(cudaStream_t stream, std::size_t n, float* x, float share) {
  MERIDIAN_LAUNCH(push_sum_scale_kernel, n, stream, n, x, share);
}

void push_sum_add(cudaStream_t stream, std::size_t n, float* x, const float* received) {
  MERIDIAN_LAUNCH(push_sum_add_kernel, n, stream, n, x, received);
}

void delayed_compensation(cudaStream_t stream, std::size_t n, float* x, const float* mixed, const float* snapshot) {
  MERIDIAN_LAUNCH(delayed_compensation_kernel, n, stream, n, x, mixed, snapshot);
}

void activation_forward(cudaStream_t stream, models::Activation f, std::size_t n, const float* in, float* out) {
  MERIDIAN_LAUNCH(activation_forward_kernel, n, stream, f, n, in, out);
}

void activation_backward(cudaStream_t stream, models::Activation f, std::size_t n, const float* in, const float* out,
                         const float* dout, float* din) {
  MERIDIAN_LAUNCH(activation_backward_kernel, n, stream, f, n, in, out, dout, din);
}

void add(cudaStream_t stream, std::size_t n, const float* a, const float* b, float* out) {
  MERIDIAN_LAUNCH(add_kernel, n, stream, n, a, b, out);
}

// The normalization kernels run one block of kThreads per channel or group (block_sum relies on it).
#define MERIDIAN_LAUNCH_BLOCKS(kernel, blocks, stream, ...)                                                        \
  do {                                                                                                             \
    if ((blocks) == 0) return;                                                                                     \
    kernel<<<static_cast<unsigned>(std::min<std::size_t>((blocks), 65535)), kThreads, 0, (stream)>>>(__VA_ARGS__); \
    MERIDIAN_CUDA_CHECK_LAUNCH();                                                                                  \
  } while (false)

void batch_norm_forward(cudaStream_t stream, const models::ChannelLayout& l, bool training, const float* in,
                        const float* gamma, const float* beta, float eps, float momentum, float* running_mean,
                        float* running_var, float* mean, float* inv_std, float* out) {
  if (l.size() == 0) return;
  MERIDIAN_LAUNCH_BLOCKS(batch_norm_forward_kernel, l.channels, stream, l.batch, l.channels, l.pixels, training, in,
                         gamma, beta, eps, momentum, running_mean, running_var, mean, inv_std, out);
}

void batch_norm_backward(cudaStream_t stream, const models::ChannelLayout& l, bool training, const float* in,
                         const float* dout, const float* gamma, const float* mean, const float* inv_std, float* dgamma,
                         float* dbeta, float* din) {
  MERIDIAN_LAUNCH_BLOCKS(batch_norm_backward_kernel, l.channels, stream, l.batch, l.channels, l.pixels, training, in,
                         dout, gamma, mean, inv_std, dgamma, dbeta, din);
}

void group_norm_forward(cudaStream_t stream, const models::ChannelLayout& l, std::size_t groups, const float* in,
                        const float* gamma, const float* beta, float eps, float* mean, float* inv_std, float* out) {
  MERIDIAN_LAUNCH_BLOCKS(group_norm_forward_kernel, l.batch * groups, stream, l.batch, l.channels, l.pixels, groups, in,
                         gamma, beta, eps, mean, inv_std, out);
}

void group_norm_backward(cudaStream_t stream, const models::ChannelLayout& l, std::size_t groups, const float* in,
                         const float* dout, const float* gamma, const float* mean, const float* inv_std, float* dgamma,
                         float* dbeta, float* din) {
  if (l.batch == 0) {
    if (l.channels == 0) return;
    MERIDIAN_CUDA_CHECK(cudaMemsetAsync(dgamma, 0, l.channels * sizeof(float), stream));
    MERIDIAN_CUDA_CHECK(cudaMemsetAsync(dbeta, 0, l.channels * sizeof(float), stream));
    return;
  }
  group_norm_parameter_grad_kernel<<<static_cast<unsigned>(std::min<std::size_t>(l.channels, 65535)), kThreads, 0,
                                     stream>>>(l.batch, l.channels, l.pixels, groups, in, dout, mean, inv_std, dgamma,
                                               dbeta);
  MERIDIAN_CUDA_CHECK_LAUNCH();
  if (din == nullptr) return;
  MERIDIAN_LAUNCH_BLOCKS(group_norm_input_grad_kernel, l.batch * groups, stream, l.batch, l.channels, l.pixels, groups,
                         in, dout, gamma, mean, inv_std, din);
}

#undef MERIDIAN_LAUNCH_BLOCKS

void average_pool_forward(cudaStream_t stream, const models::PoolGeometry& g, std::size_t batch, const float* in,
                          float* out) {
  MERIDIAN_LAUNCH(average_pool_forward_kernel, batch * g.channels * g.out_height() * g.out_width(), stream, dims(g),
                  batch, in, out);
}

void average_pool_backward(cudaStream_t stream, const models::PoolGeometry& g, std::size_t batch, const float* dout,
                           float* din) {
  MERIDIAN_LAUNCH(average_pool_backward_kernel, batch * g.channels * g.in_height * g.in_width, stream, dims(g), batch,
                  dout, din);
}

void global_average_pool_forward(cudaStream_t stream, const models::ChannelLayout& l, const float* in, float* out) {
  MERIDIAN_LAUNCH(global_average_pool_forward_kernel, l.batch * l.channels, stream, l.batch * l.channels, l.pixels, in,
                  out);
}

void global_average_pool_backward(cudaStream_t stream, const models::ChannelLayout& l, const float* dout, float* din) {
  MERIDIAN_LAUNCH(global_average_pool_backward_kernel, l.size(), stream, l.batch * l.channels, l.pixels, dout, din);
}

void dropout(cudaStream_t stream, std::size_t n, float p, std::uint64_t key, const float* in, float* out) {
  MERIDIAN_LAUNCH(dropout_kernel, n, stream, n, p, key, in, out);
}

#undef MERIDIAN_LAUNCH

}  // namespace meridian::cuda::kernels
