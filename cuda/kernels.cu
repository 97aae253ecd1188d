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

#define MERIDIAN_GRID_STRIDE(i, n) \
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < (n); i += std::size_t{gridDim.x} * blockDim.x)

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
    const std::size_t c = (i / (g.in_width * g.in_height)) % g.in_channels, b = i / (g.in_width * g.in_height * g.in_channels);
    float acc = 0.0f;
    for (std::size_t ky = 0; ky < k; ++ky) {
      const long long ny = static_cast<long long>(iy + g.padding) - static_cast<long long>(ky);
      if (ny < 0 || ny % static_cast<long long>(s) != 0 || ny / static_cast<long long>(s) >= static_cast<long long>(oh)) continue;
      const std::size_t oy = static_cast<std::size_t>(ny) / s;
      for (std::size_t kx = 0; kx < k; ++kx) {
        const long long nx = static_cast<long long>(ix + g.padding) - static_cast<long long>(kx);
        if (nx < 0 || nx % static_cast<long long>(s) != 0 || nx / static_cast<long long>(s) >= static_cast<long long>(ow)) continue;
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
__global__ void max_pool_backward_kernel(PoolDims g, std::size_t batch, const float* dout,
                                         const std::int32_t* argmax, float* din) {
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
    math::adam_update(w[i], m[i], v[i], g[i], lr, beta1, beta2, eps, weight_decay, bias_correction1,
                      bias_correction2);
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

#undef MERIDIAN_GRID_STRIDE

}  // namespace

// Each launcher skips empty work (a zero-sized grid is a launch error) and checks the launch.
#define MERIDIAN_LAUNCH(kernel, n, stream, ...)                         \
  do {                                                                  \
    if ((n) == 0) return;                                               \
    kernel<<<blocks_for(n), kThreads, 0, (stream)>>>(__VA_ARGS__);      \
    MERIDIAN_CUDA_CHECK_LAUNCH();                                       \
  } while (false)

void im2col(cudaStream_t stream, const models::ConvGeometry& g, std::size_t batch, const float* images,
            float* columns) {
  MERIDIAN_LAUNCH(im2col_kernel, g.patch_size() * batch * g.out_height() * g.out_width(), stream, dims(g), batch, images,
                  columns);
}

void col2im(cudaStream_t stream, const models::ConvGeometry& g, std::size_t batch, const float* columns,
            float* images) {
  MERIDIAN_LAUNCH(col2im_kernel, batch * g.in_channels * g.in_height * g.in_width, stream, dims(g), batch, columns, images);
}

void sum_channels(cudaStream_t stream, std::size_t batch, std::size_t channels, std::size_t pixels,
                  const float* images, float* sums) {
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
  MERIDIAN_LAUNCH(max_pool_forward_kernel, batch * g.channels * g.out_height() * g.out_width(), stream, dims(g), batch, in,
                  out, argmax);
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

void momentum_update(cudaStream_t stream, std::size_t n, float* w, float* u, const float* g, float lr,
                     float momentum, float weight_decay, bool nesterov) {
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

#undef MERIDIAN_LAUNCH

}  // namespace meridian::cuda::kernels
