#include "models/residual_network.h"

#include <vector>

#include "models/batch_norm.h"
#include "models/conv2d.h"
#include "models/layer_sequence.h"
#include "models/relu.h"

namespace meridian::models {

std::unique_ptr<ResidualBlock> make_basic_block(Shape input, std::size_t out_channels, std::size_t stride) {
  std::vector<std::unique_ptr<Layer>> body;
  body.push_back(std::make_unique<Conv2d>(input, out_channels, 3, stride, 1, InitScheme::he));
  const Shape out = body.back()->output_shape();
  body.push_back(std::make_unique<BatchNorm>(out));
  body.push_back(std::make_unique<Relu>(out));
  body.push_back(std::make_unique<Conv2d>(out, out_channels, 3, 1, 1, InitScheme::he));
  body.push_back(std::make_unique<BatchNorm>(out));
  std::unique_ptr<LayerSequence> shortcut;
  if (!(out == input)) {
    std::vector<std::unique_ptr<Layer>> projection;
    projection.push_back(std::make_unique<Conv2d>(input, out_channels, 1, stride, 0, InitScheme::he));
    projection.push_back(std::make_unique<BatchNorm>(projection.back()->output_shape()));
    shortcut = std::make_unique<LayerSequence>(std::move(projection));
  }
  return std::make_unique<ResidualBlock>(std::make_unique<LayerSequence>(std::move(body)), std::move(shortcut));
}

}  // namespace meridian::models
