// libFuzzer target for the CSV loader (models/data/csv_reader.h): the input is the file (plain or
// gzip-compressed), read with a header and without one. Refusals (error::UserError) are the expected
// outcome; a crash, a sanitizer report or any other exception is a finding.
// Build and run with `make fuzz FUZZ_TARGET=csv`; seeds: tests/fuzz/corpus/csv/.
#include <cstddef>
#include <cstdint>

#include "tests/fuzz/fuzz_inputs.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  meridian::tests::fuzz_csv({data, size});
  return 0;
}
