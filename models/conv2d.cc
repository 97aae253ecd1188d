#include "models/conv2d.h"

#include <stdexcept>

#include "error/error.h"
#include "models/checked_size.h"

namespace meridian::models {

Conv2d::Conv2d(Shape input, std::size_t out_channels, std::size_t kernel, std::size_t stride, std::size_t padding,
               InitScheme init)
    : input_(input), out_channels_(out_channels), init_(init) {
  geometry_ = ConvGeometry{input.channels, input.height, input.width, kernel, stride, padding};
  // Every size the geometry computes, checked before it is used: the padded input, the output, the
  // column matrix of one sample (patch × output pixels) and the parameters.
  const std::string what = "conv2d(" + std::to_string(input.channels) + "->" + std::to_string(out_channels) + ",k" +
                           std::to_string(kernel) + ",s" + std::to_string(stride) + ",p" + std::to_string(padding) +
                           ") on " + input.to_string();
  const std::size_t border = checked_product({2, padding}, kMaxSampleValues, what + ": padding");
  const std::size_t padded_height = checked_sum(input.height, border, kMaxSampleValues, what + ": padded height");
  const std::size_t padded_width = checked_sum(input.width, border, kMaxSampleValues, what + ": padded width");
  if (kernel == 0 || stride == 0 || padded_height < kernel || padded_width < kernel)
    throw error::UserError("conv2d: kernel " + std::to_string(kernel) + " does not fit input " + input.to_string() +
                           " with padding " + std::to_string(padding));
  const std::size_t patch = checked_product({input.channels, kernel, kernel}, kMaxSampleValues, what + ": patch");
  checked_product({out_channels, geometry_.out_height(), geometry_.out_width()}, kMaxSampleValues, what + ": output");
  checked_product({patch, geometry_.out_height(), geometry_.out_width()}, kMaxSampleValues, what + ": column matrix");
  checked_product({out_channels, checked_sum(patch, 1, kMaxSampleValues, what + ": patch")}, kMaxModelParameters,
                  what + ": parameters");
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

void Conv2d::reserve(Backend& backend, std::size_t batch) {
  if (!convolution_) convolution_ = backend.make_convolution(geometry_, out_channels_);
  convolution_->reserve(batch);
}

void Conv2d::forward(Backend& backend, const float* in, float* out, std::size_t batch) {
  reserve(backend, batch);
  convolution_->forward(batch, in, weight_.data(), bias_.data(), out);
}

void Conv2d::backward(Backend& backend, const float* in, const float*, const float* dout, float* din,
                      std::size_t batch) {
  reserve(backend, batch);
  if (squared_norms_ != nullptr) {
    norms_->add(backend, batch, in, dout, squared_norms_);
    // The parameter gradients are not needed in this pass; only din is, and the first layer not even that.
    if (din != nullptr) convolution_->backward(batch, in, dout, weight_.data(), nullptr, nullptr, din);
    return;
  }
  convolution_->backward(batch, in, dout, weight_.data(), weight_grad_.data(), bias_grad_.data(), din);
}

bool Conv2d::track_per_example_norms(double* squared_norms) {
  if (squared_norms != nullptr && !norms_) norms_ = std::make_unique<ConvolutionNorms>(geometry_, out_channels_);
  squared_norms_ = squared_norms;
  return true;
}

}  // namespace meridian::models
