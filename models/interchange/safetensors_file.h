// Writes an exported model as a safetensors file (the format of Hugging Face's safetensors library):
//   u64 little-endian N, then N bytes of JSON header, then the tensors' raw little-endian bytes.
// The header maps each tensor's name to {"dtype": "F32", "shape": [...], "data_offsets": [begin, end]}
// (offsets into the data that follows the header) and "__metadata__" to the model's string metadata,
// which describes the network and its input standardization (exported_model.h). The header is padded
// with spaces to a multiple of 8 bytes so that the data is aligned.
#pragma once

#include <filesystem>

#include "models/interchange/exported_model.h"

namespace meridian::models::interchange {

// Writes `model` to `path` (replacing a file there). Throws error::UserError naming the path when it
// cannot be written.
void write_safetensors(const std::filesystem::path& path, const ExportedModel& model);

}  // namespace meridian::models::interchange
