// The building blocks of He et al.'s ResNets (2016), shared by the built-in resnet8/resnet20
// (model_factory.h) and model files' `basic_block` (model_file.h).
#pragma once

#include <memory>

#include "models/residual_block.h"

namespace meridian::models {

// A basic block: body = conv3×3(stride) → batch norm → ReLU → conv3×3 → batch norm; the shortcut is the
// identity where the shape is kept, else a 1×1 convolution with `stride` followed by batch norm (option B
// of the paper). The ReLU after the sum is not part of it. Throws error::UserError when the
// convolutions do not fit `input`.
std::unique_ptr<ResidualBlock> make_basic_block(Shape input, std::size_t out_channels, std::size_t stride);

}  // namespace meridian::models
