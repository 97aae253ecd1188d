// libFuzzer target for the NumPy loaders (models/data/npy_reader.h): an input that starts like a zip
// archive ("PK") is read as an .npz (models/data/zip_archive.h, then both arrays); any other is split
// into a features .npy and a labels .npy, the first two bytes giving the length of the features part
// (little-endian), and read once for each array layout. Refusals (error::UserError) are the expected
// outcome; a crash, a sanitizer report or any other exception is a finding.
// Build and run with `make fuzz FUZZ_TARGET=npy`; seeds: tests/fuzz/corpus/npy/.
#include <cstddef>
#include <cstdint>

#include "tests/fuzz/fuzz_inputs.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  meridian::tests::fuzz_npy({data, size});
  return 0;
}
