#include "models/per_example_norms.h"

namespace meridian::models {
namespace {

// Σ v² in double: the norms decide the clipping factors, and a float sum over a layer of thousands of
// products would round off the small ones.
double squared_sum(const float* v, std::size_t n) {
  double sum = 0.0;
  for (std::size_t i = 0; i < n; ++i) sum += static_cast<double>(v[i]) * v[i];
  return sum;
}

}  // namespace

void add_linear_norms(std::size_t batch, std::size_t in, std::size_t out, const float* x, const float* dout,
                      double* squared_norms) {
  for (std::size_t b = 0; b < batch; ++b) {
    const double g = squared_sum(dout + b * out, out);
    squared_norms[b] += g * squared_sum(x + b * in, in) + g;
  }
}

void add_group_norm_norms(const ChannelLayout& l, std::size_t groups, const float* in, const float* dout,
                          const float* mean, const float* inv_std, double* squared_norms) {
  const std::size_t per_group = l.channels / groups;
  for (std::size_t b = 0; b < l.batch; ++b) {
    double sum = 0.0;
    for (std::size_t c = 0; c < l.channels; ++c) {
      const std::size_t s = b * groups + c / per_group, row = (b * l.channels + c) * l.pixels;
      double dgamma = 0.0, dbeta = 0.0;
      for (std::size_t p = 0; p < l.pixels; ++p) {
        const double dy = dout[row + p];
        dbeta += dy;
        dgamma += dy * (static_cast<double>(in[row + p]) - mean[s]) * inv_std[s];
      }
      sum += dgamma * dgamma + dbeta * dbeta;
    }
    squared_norms[b] += sum;
  }
}

namespace {

ConvolutionNorms::Method cheaper(const ConvGeometry& g, std::size_t out_channels) {
  // Multiplications per image: out_c·patch·P materialized against P²·(patch + out_c) for the two Grams.
  const std::size_t pixels = g.out_height() * g.out_width(), patch = g.patch_size();
  return pixels * (patch + out_channels) < out_channels * patch ? ConvolutionNorms::Method::gram
                                                                 : ConvolutionNorms::Method::materialized;
}

}  // namespace

ConvolutionNorms::ConvolutionNorms(const ConvGeometry& g, std::size_t out_channels)
    : ConvolutionNorms(g, out_channels, cheaper(g, out_channels)) {}

ConvolutionNorms::ConvolutionNorms(const ConvGeometry& g, std::size_t out_channels, Method method)
    : geometry_(g), out_channels_(out_channels), method_(method) {}

void ConvolutionNorms::add(Backend& backend, std::size_t batch, const float* in, const float* dout,
                           double* squared_norms) {
  const std::size_t pixels = geometry_.out_height() * geometry_.out_width(), patch = geometry_.patch_size();
  const std::size_t in_size = geometry_.in_channels * geometry_.in_height * geometry_.in_width;
  const std::size_t out_size = out_channels_ * pixels;
  columns_.reserve(backend, patch * pixels);
  product_.reserve(backend, method_ == Method::gram ? 2 * pixels * pixels : out_channels_ * patch);
  float* columns = columns_.data();
  for (std::size_t b = 0; b < batch; ++b) {
    const float* d = dout + b * out_size;  // (out_c, P)
    backend.im2col(geometry_, 1, in + b * in_size, columns);
    double sum = 0.0;
    if (method_ == Method::materialized) {
      // G (out_c, patch) = D (out_c, P) · Xᵀ (P, patch)
      backend.gemm(false, true, out_channels_, patch, pixels, 1.0f, d, pixels, columns, pixels, 0.0f,
                   product_.data(), patch);
      sum = squared_sum(product_.data(), out_channels_ * patch);
    } else {
      // Xᵀ·X and Dᵀ·D, each (P, P); ‖D·Xᵀ‖² = trace(X·Dᵀ·D·Xᵀ) = Σ_pq (XᵀX)_pq·(DᵀD)_pq.
      float* xx = product_.data();
      float* dd = xx + pixels * pixels;
      backend.gemm(true, false, pixels, pixels, patch, 1.0f, columns, pixels, columns, pixels, 0.0f, xx, pixels);
      backend.gemm(true, false, pixels, pixels, out_channels_, 1.0f, d, pixels, d, pixels, 0.0f, dd, pixels);
      for (std::size_t i = 0; i < pixels * pixels; ++i) sum += static_cast<double>(xx[i]) * dd[i];
    }
    for (std::size_t o = 0; o < out_channels_; ++o) {
      double bias = 0.0;
      for (std::size_t p = 0; p < pixels; ++p) bias += d[o * pixels + p];
      sum += bias * bias;
    }
    squared_norms[b] += sum;
  }
}

}  // namespace meridian::models
