// libFuzzer target for the receive pipeline (decode_header, membership bodies, validator, reassembler).
// Build and run with `make fuzz` (clang, ASan/UBSan); seeds: tests/fuzz/corpus/wire_decoder/.
// Input format: see tests/peer/wire_input.h. One pipeline persists across inputs so that chunked
// messages and replay records build up state the way a long-lived connection does.
#include <cstddef>
#include <cstdint>

#include "tests/peer/wire_input.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static meridian::tests::WirePipeline pipeline;
  pipeline.feed(data, size);
  return 0;
}
