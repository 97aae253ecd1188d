#include "models/conv2d.h"

#include <stdexcept>

namespace meridian::models {

Conv2d::Conv2d(Shape input, std::size_t out_channels, std::size_t kernel, std::size_t stride, std::size_t padding,
               InitScheme init)
    : input_(input), out_channels_(out_channels), init_(init) {
  geometry_ = ConvGeometry{input.channels, input.height, input.width, kernel, stride, padding};
  if (kernel == 0 || stride == 0 || input.height + 2 * padding < kernel || input.width + 2 * padding < kernel)
    throw std::invalid_argument("conv2d: kernel " + std::to_string(kernel) + " does not fit input " +
                                input.to_string() + " with padding " + std::to_string(padding));
}

std::string Conv2d::describe() const {
  return "conv2d(" + std::to_string(input_.channels) + "->" + std::to_string(out_channels_) + ",k" +
         std::to_string(geometry_.kernel) + ",s" + std::to_string(geometry_.stride) + ",p" +
         std::to_string(geometry_.padding) + ")";
}

Shape Conv2d::output_shape() const { return {out_channels_, geometry_.out_height(), geometry_.out_width()}; }

void Conv2d::bind(std::span<float> parameters, std::span<float> gradients) {
  const std::size_t w = out_channels_ * geometry_.patch_size();
  weight_ = parameters.subspan(0, w);
  bias_ = parameters.subspan(w, out_channels_);
  weight_grad_ = gradients.subspan(0, w);
  bias_grad_ = gradients.subspan(w, out_channels_);
}

void Conv2d::initialize(SplitMix64& random) {
  const std::size_t k2 = geometry_.kernel * geometry_.kernel;
  initialize_weights(weight_, init_, geometry_.patch_size(), out_channels_ * k2, random);
  for (float& b : bias_) b = 0.0f;
}

void Conv2d::reserve(std::size_t batch) {
  const std::size_t pixels = batch * geometry_.out_height() * geometry_.out_width();
  // The column matrix is reused as dcolumns in backward, so one buffer serves both.
  if (columns_.size() < geometry_.patch_size() * pixels) columns_.resize(geometry_.patch_size() * pixels);
  if (product_.size() < out_channels_ * pixels) product_.resize(out_channels_ * pixels);
}

void Conv2d::forward(Backend& backend, const float* in, float* out, std::size_t batch) {
  reserve(batch);
  const std::size_t out_pixels = geometry_.out_height() * geometry_.out_width();
  const std::size_t n = batch * out_pixels, patch = geometry_.patch_size();
  backend.im2col(geometry_, batch, in, columns_.data());
  // product (out_c, batch · pixels) = W (out_c, patch) · columns (patch, batch · pixels)
  backend.gemm(false, false, out_channels_, n, patch, 1.0f, weight_.data(), patch, columns_.data(), n, 0.0f,
               product_.data(), n);
  backend.channels_to_images_add_bias(batch, out_channels_, out_pixels, product_.data(), bias_.data(), out);
}

void Conv2d::backward(Backend& backend, const float* in, const float* out, const float* dout, float* din,
                      std::size_t batch) {
  const std::size_t out_pixels = geometry_.out_height() * geometry_.out_width();
  const std::size_t n = batch * out_pixels, patch = geometry_.patch_size();
  backend.images_to_channels(batch, out_channels_, out_pixels, dout, product_.data());  // dproduct
  // dW (out_c, patch) = dproduct (out_c, n) · columnsᵀ (n, patch); db = row sums of dproduct.
  backend.gemm(false, true, out_channels_, patch, n, 1.0f, product_.data(), n, columns_.data(), n, 0.0f,
               weight_grad_.data(), patch);
  backend.sum(out_channels_, n, product_.data(), true, bias_grad_.data());
  if (din == nullptr) return;
  // dcolumns (patch, n) = Wᵀ (patch, out_c) · dproduct (out_c, n), written over the columns (no longer needed).
  backend.gemm(true, false, patch, n, out_channels_, 1.0f, weight_.data(), patch, product_.data(), n, 0.0f,
               columns_.data(), n);
  backend.col2im(geometry_, batch, columns_.data(), din);
}

}  // namespace meridian::models
