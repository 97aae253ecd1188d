// 2-D convolution over NCHW images with W (out_channels, in_channels, k, k) and b (out_channels),
// PyTorch's layout (torch.nn.Conv2d). The computation is the backend's (Backend::make_convolution): on
// the CPU products over the padded image in place (implicit_gemm_convolution.h) or im2col + GEMM
// (im2col_convolution.h) without AVX2, cuDNN on the GPU; it is made at the first reserve().
#pragma once

#include <memory>

#include "models/convolution.h"
#include "models/layer.h"
#include "models/per_example_norms.h"

namespace meridian::models {

class Conv2d final : public Layer {
 public:
  // Throws error::UserError when the kernel does not fit the padded input.
  Conv2d(Shape input, std::size_t out_channels, std::size_t kernel, std::size_t stride, std::size_t padding,
         InitScheme init);

  std::string describe() const override;
  std::unique_ptr<Layer> clone() const override {
    return std::make_unique<Conv2d>(input_, out_channels_, geometry_.kernel, geometry_.stride, geometry_.padding,
                                    init_);
  }
  Shape input_shape() const override { return input_; }
  Shape output_shape() const override;
  std::size_t parameter_count() const override { return out_channels_ * geometry_.patch_size() + out_channels_; }
  void bind(std::span<float> parameters, std::span<float> gradients) override;
  void initialize(SplitMix64& random) override;
  void reserve(Backend& backend, std::size_t batch) override;
  void forward(Backend& backend, const float* in, float* out, std::size_t batch) override;
  void backward(Backend& backend, const float* in, const float* out, const float* dout, float* din,
                std::size_t batch) override;
  bool track_per_example_norms(double* squared_norms) override;

 private:
  Shape input_;
  std::size_t out_channels_;
  ConvGeometry geometry_;
  InitScheme init_;
  std::span<float> weight_, bias_, weight_grad_, bias_grad_;  // (out_c, patch), (out_c)
  std::unique_ptr<Convolution> convolution_;  // the backend's, with its workspace; null before reserve()
  double* squared_norms_ = nullptr;           // (batch) while tracking per-example norms
  std::unique_ptr<ConvolutionNorms> norms_;   // made when tracking starts
};

}  // namespace meridian::models
