// libFuzzer target for the image loader (models/data/image_file.h): the input is a PNG or JPEG file
// (told by its first bytes), probed and decoded to gray and to RGB. Refusals (error::UserError) are the
// expected outcome; a crash, a sanitizer report or any other exception is a finding.
// Build and run with `make fuzz FUZZ_TARGET=image_file`; seeds: tests/fuzz/corpus/image_file/.
#include <cstddef>
#include <cstdint>

#include "tests/fuzz/fuzz_inputs.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  meridian::tests::fuzz_image_file({data, size});
  return 0;
}
