// libFuzzer target for roster files (peer/roster.h) and the edits `meridian roster add|remove` make to
// them (daemon/control/roster_file.h): the input is the file's text; it is parsed, printed and parsed again,
// and one site is added to it and its first site removed. Refusals (error::UserError) are the expected
// outcome; a crash, a sanitizer report or any other exception is a finding.
// Build and run with `make fuzz FUZZ_TARGET=roster`; seeds: tests/fuzz/corpus/roster/.
#include <cstddef>
#include <cstdint>

#include "tests/fuzz/fuzz_inputs.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  meridian::tests::fuzz_roster({data, size});
  return 0;
}
