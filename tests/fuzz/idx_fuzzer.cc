// libFuzzer target for the IDX loader of MNIST and Fashion-MNIST (models/data/idx_reader.h): the input
// is split into an images file and a labels file (each raw or gzip-compressed), the first two bytes
// giving the length of the images part (little-endian); the pair is read whole and with a selection of
// every other row. Refusals (error::UserError) are the expected outcome; a crash, a sanitizer report or
// any other exception is a finding.
// Build and run with `make fuzz FUZZ_TARGET=idx`; seeds: tests/fuzz/corpus/idx/.
#include <cstddef>
#include <cstdint>

#include "tests/fuzz/fuzz_inputs.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  meridian::tests::fuzz_idx({data, size});
  return 0;
}
