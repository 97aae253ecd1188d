// Model files: networks described in a small line-oriented text format instead of C++ (the grammar, with
// examples, is in docs/models.md; example files are in examples/models/). One statement per line, `#`
// starts a comment:
//
//   model small-resnet                  # optional: the name in the fingerprint (default: the file's stem)
//   conv2d 16 kernel=3 padding=1
//   batch_norm
//   relu
//   residual                            # body(x) + shortcut(x)
//     conv2d 16 kernel=3 padding=1
//     batch_norm
//   end                                 # no `shortcut` section: the identity
//   relu
//   global_avg_pool
//   linear classes                      # the output layer: as many features as the data has classes
//
// The layers take their input shape from the previous layer (the first from the data), so one file fits
// any input the layers fit (1×28×28 and 3×32×32 alike). The model's fingerprint lists every layer with all
// its settings (Model::fingerprint), so it covers the whole description.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>

#include "error/error.h"
#include "models/model.h"

namespace meridian::models {

// A model file that cannot be read or describes no valid network for the input. what() is
// "SOURCE:LINE: problem" (or "SOURCE: problem" when no line is to blame), naming what was found and what
// was expected.
class ModelFileError : public error::UserError {
 public:
  using error::UserError::UserError;
};

// The network that `text` describes, for samples of shape `input` and `classes` classes. `source` names
// the text in messages and, without a `model` line, is the model's kind. Throws ModelFileError.
std::unique_ptr<Model> parse_model_file(std::string_view text, const std::string& source, Shape input,
                                        std::size_t classes, std::shared_ptr<Backend> backend, std::uint64_t seed);

// Reads and parses the file at `path` (its stem is the default name). Throws ModelFileError, also when
// the file cannot be read.
std::unique_ptr<Model> load_model_file(const std::filesystem::path& path, Shape input, std::size_t classes,
                                       std::shared_ptr<Backend> backend, std::uint64_t seed);

}  // namespace meridian::models
