#include <catch2/catch.hpp>

#include "gossip/algorithm.h"

using namespace meridian::gossip;

TEST_CASE("algorithms round-trip through their names", "[gossip][unit]") {
  for (auto a : {Algorithm::kAllReduce, Algorithm::kDts, Algorithm::kSgp, Algorithm::kDsync, Algorithm::kLocal})
    CHECK(parse_algorithm(name_of(a)) == a);
  CHECK_FALSE(parse_algorithm("gossip"));
}
