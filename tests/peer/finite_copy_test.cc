// copy_finite: the copy the reassembler makes of each received chunk, checked for NaN and infinity in
// the same pass, block by block.
#include <catch2/catch.hpp>

#include <cstring>
#include <limits>
#include <vector>

#include "peer/finite_copy.h"

using meridian::peer::copy_finite;

TEST_CASE("copy_finite copies every float and finds a NaN or an infinity wherever it is", "[peer][wire][unit]") {
  // Lengths around the block size (2048 floats) and several blocks, from an unaligned source.
  for (std::size_t n : {1u, 7u, 2047u, 2048u, 2049u, 6000u}) {
    std::vector<float> values(n);
    for (std::size_t i = 0; i < n; ++i) values[i] = static_cast<float>(i) * 0.25f - 3.0f;
    std::vector<std::byte> bytes(n * sizeof(float) + 1);
    std::memcpy(bytes.data() + 1, values.data(), n * sizeof(float));
    std::vector<float> out(n, -1.0f);
    INFO("n=" << n);
    CHECK(copy_finite(bytes.data() + 1, out.data(), n));
    CHECK(out == values);
    for (std::size_t at : {std::size_t{0}, n / 2, n - 1}) {
      for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                        -std::numeric_limits<float>::infinity()}) {
        std::vector<std::byte> poisoned = bytes;
        std::memcpy(poisoned.data() + 1 + at * sizeof(float), &bad, sizeof bad);
        INFO("at=" << at << " value=" << bad);
        CHECK_FALSE(copy_finite(poisoned.data() + 1, out.data(), n));
      }
    }
  }
  CHECK(copy_finite(nullptr, nullptr, 0));
}
