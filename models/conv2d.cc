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
  const std::size_t image = geometry_.patch_size() * geometry_.out_height() * geometry_.out_width();
  if (columns_.size() < batch * image) columns_.resize(batch * image);
  if (dcolumns_.size() < image) dcolumns_.resize(image);
}

void Conv2d::forward(Backend& backend, const float* in, float* out, std::size_t batch) {
  reserve(batch);
  const std::size_t pixels = geometry_.out_height() * geometry_.out_width(), patch = geometry_.patch_size();
  const std::size_t in_size = input_.size(), out_size = out_channels_ * pixels;
  for (std::size_t b = 0; b < batch; ++b) {
    float* image_out = out + b * out_size;  // (out_c, pixels)
    float* columns = columns_.data() + b * patch * pixels;
    backend.im2col(geometry_, 1, in + b * in_size, columns);
    backend.fill_rows(out_channels_, pixels, bias_.data(), image_out);
    // image_out (out_c, pixels) += W (out_c, patch) · columns (patch, pixels)
    backend.gemm(false, false, out_channels_, pixels, patch, 1.0f, weight_.data(), patch, columns, pixels, 1.0f,
                 image_out, pixels);
  }
}

void Conv2d::backward(Backend& backend, const float* in, const float* out, const float* dout, float* din,
                      std::size_t batch) {
  const std::size_t pixels = geometry_.out_height() * geometry_.out_width(), patch = geometry_.patch_size();
  const std::size_t in_size = input_.size(), out_size = out_channels_ * pixels;
  backend.sum_channels(batch, out_channels_, pixels, dout, bias_grad_.data());
  for (std::size_t b = 0; b < batch; ++b) {
    const float* image_dout = dout + b * out_size;  // (out_c, pixels)
    const float* columns = columns_.data() + b * patch * pixels;
    // dW (out_c, patch) (+)= dout (out_c, pixels) · columnsᵀ (pixels, patch)
    backend.gemm(false, true, out_channels_, patch, pixels, 1.0f, image_dout, pixels, columns, pixels,
                 b == 0 ? 0.0f : 1.0f, weight_grad_.data(), patch);
    if (din == nullptr) continue;
    // dcolumns (patch, pixels) = Wᵀ (patch, out_c) · dout (out_c, pixels)
    backend.gemm(true, false, patch, pixels, out_channels_, 1.0f, weight_.data(), patch, image_dout, pixels, 0.0f,
                 dcolumns_.data(), pixels);
    backend.col2im(geometry_, 1, dcolumns_.data(), din + b * in_size);
  }
}

}  // namespace meridian::models
