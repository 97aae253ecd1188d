// libFuzzer target for the checkpoint reader and what `meridian eval` does with a checkpoint: read and
// verify it (daemon/checkpoint/checkpoint.h), rebuild its model from the fingerprint or the stored model file, and
// evaluate it on a small image dataset (daemon/checkpoint/checkpoint_model.h). Refusals (error::UserError) are the
// expected outcome; a crash, a sanitizer report or any other exception is a finding.
// Build and run with `make fuzz FUZZ_TARGET=checkpoint`; seeds: tests/fuzz/corpus/checkpoint/.
#include <cstddef>
#include <cstdint>

#include "tests/fuzz/fuzz_inputs.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  meridian::tests::fuzz_checkpoint({data, size});
  return 0;
}
