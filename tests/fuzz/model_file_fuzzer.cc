// libFuzzer target for model files (models/model_file.h): the input is the file's text, parsed for
// 1×12×12 images of 3 classes, and a model it describes classifies one batch. Refusals
// (error::UserError) are the expected outcome; a crash, a sanitizer report or any other exception is a
// finding. Build and run with `make fuzz FUZZ_TARGET=model_file`; seeds:
// tests/fuzz/corpus/model_file/.
#include <cstddef>
#include <cstdint>

#include "tests/fuzz/fuzz_inputs.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  meridian::tests::fuzz_model_file({data, size});
  return 0;
}
