#include "models/linear.h"

#include "models/checked_size.h"
#include "models/per_example_norms.h"

namespace meridian::models {

Linear::Linear(std::size_t in_features, std::size_t out_features, InitScheme init)
    : in_(in_features), out_(out_features), init_(init) {
  // The weights and the bias, out · (in + 1), within the model's bound; so is every size bind() takes.
  checked_product({out_, checked_sum(in_, 1, kMaxSampleValues, describe() + ": input features")}, kMaxModelParameters,
                  describe() + ": parameters");
}

std::string Linear::describe() const { return "linear(" + std::to_string(in_) + "->" + std::to_string(out_) + ")"; }

void Linear::bind(std::span<float> parameters, std::span<float> gradients) {
  weight_ = parameters.subspan(0, out_ * in_);
  bias_ = parameters.subspan(out_ * in_, out_);
  weight_grad_ = gradients.subspan(0, out_ * in_);
  bias_grad_ = gradients.subspan(out_ * in_, out_);
}

void Linear::initialize(SplitMix64& random) {
  initialize_weights(weight_, init_, in_, out_, random);
  for (float& b : bias_) b = 0.0f;
}

void Linear::forward(Backend& backend, const float* in, float* out, std::size_t batch) {
  // out (batch, out) = bias broadcast, then += in (batch, in) · Wᵀ (in, out).
  backend.broadcast_rows(batch, out_, bias_.data(), out);
  backend.gemm(false, true, batch, out_, in_, 1.0f, in, in_, weight_.data(), in_, 1.0f, out, out_);
}

void Linear::backward(Backend& backend, const float* in, const float* out, const float* dout, float* din,
                      std::size_t batch) {
  if (squared_norms_ != nullptr) {
    add_linear_norms(batch, in_, out_, in, dout, squared_norms_);
  } else {
    // dW (out, in) = doutᵀ (out, batch) · in (batch, in); db = column sums of dout.
    backend.gemm(true, false, out_, in_, batch, 1.0f, dout, out_, in, in_, 0.0f, weight_grad_.data(), in_);
    backend.sum(batch, out_, dout, false, bias_grad_.data());
  }
  // din (batch, in) = dout (batch, out) · W (out, in).
  if (din != nullptr)
    backend.gemm(false, false, batch, in_, out_, 1.0f, dout, out_, weight_.data(), in_, 0.0f, din, in_);
}

bool Linear::track_per_example_norms(double* squared_norms) {
  squared_norms_ = squared_norms;
  return true;
}

}  // namespace meridian::models
