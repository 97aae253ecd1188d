#include "models/im2col_convolution.h"

namespace meridian::models {

Im2colConvolution::Im2colConvolution(Backend& backend, const ConvGeometry& g, std::size_t out_channels)
    : backend_(backend), geometry_(g), out_channels_(out_channels) {}

void Im2colConvolution::reserve(std::size_t batch) {
  const std::size_t image = geometry_.patch_size() * geometry_.out_height() * geometry_.out_width();
  columns_.reserve(backend_, batch * image);
  dcolumns_.reserve(backend_, image);
}

void Im2colConvolution::forward(std::size_t batch, const float* in, const float* weight, const float* bias,
                                float* out) {
  reserve(batch);
  const std::size_t pixels = geometry_.out_height() * geometry_.out_width(), patch = geometry_.patch_size();
  const std::size_t in_size = geometry_.in_channels * geometry_.in_height * geometry_.in_width;
  const std::size_t out_size = out_channels_ * pixels;
  for (std::size_t b = 0; b < batch; ++b) {
    float* image_out = out + b * out_size;  // (out_c, pixels)
    float* columns = columns_.data() + b * patch * pixels;
    backend_.im2col(geometry_, 1, in + b * in_size, columns);
    backend_.fill_rows(out_channels_, pixels, bias, image_out);
    // image_out (out_c, pixels) += W (out_c, patch) · columns (patch, pixels)
    backend_.gemm(false, false, out_channels_, pixels, patch, 1.0f, weight, patch, columns, pixels, 1.0f, image_out,
                  pixels);
  }
}

void Im2colConvolution::backward(std::size_t batch, const float* /*in: its columns are kept*/, const float* dout,
                                 const float* weight, float* dweight, float* dbias, float* din) {
  const std::size_t pixels = geometry_.out_height() * geometry_.out_width(), patch = geometry_.patch_size();
  const std::size_t in_size = geometry_.in_channels * geometry_.in_height * geometry_.in_width;
  const std::size_t out_size = out_channels_ * pixels;
  if (dbias != nullptr) backend_.sum_channels(batch, out_channels_, pixels, dout, dbias);
  for (std::size_t b = 0; b < batch; ++b) {
    const float* image_dout = dout + b * out_size;  // (out_c, pixels)
    const float* columns = columns_.data() + b * patch * pixels;
    // dW (out_c, patch) (+)= dout (out_c, pixels) · columnsᵀ (pixels, patch)
    if (dweight != nullptr)
      backend_.gemm(false, true, out_channels_, patch, pixels, 1.0f, image_dout, pixels, columns, pixels,
                    b == 0 ? 0.0f : 1.0f, dweight, patch);
    if (din == nullptr) continue;
    // dcolumns (patch, pixels) = Wᵀ (patch, out_c) · dout (out_c, pixels)
    backend_.gemm(true, false, patch, pixels, out_channels_, 1.0f, weight, patch, image_dout, pixels, 0.0f,
                  dcolumns_.data(), pixels);
    backend_.col2im(geometry_, 1, dcolumns_.data(), din + b * in_size);
  }
}

}  // namespace meridian::models
