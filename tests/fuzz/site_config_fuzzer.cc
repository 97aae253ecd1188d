// libFuzzer target for site configuration files (daemon/site_config.h): the input is the TOML file
// `meridian start --config` reads; it is read on top of the defaults and then checked and typed
// (parse_site_settings), as `meridian start` does. Refusals (error::UserError) are the expected
// outcome; a crash, a sanitizer report or any other exception is a finding.
// Build and run with `make fuzz FUZZ_TARGET=site_config`; seeds: tests/fuzz/corpus/site_config/.
#include <cstddef>
#include <cstdint>

#include "tests/fuzz/fuzz_inputs.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  meridian::tests::fuzz_site_config({data, size});
  return 0;
}
