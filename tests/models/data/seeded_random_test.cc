#include <catch2/catch.hpp>

#include <cmath>
#include <numeric>
#include <vector>

#include "models/data/seeded_random.h"

using meridian::models::data::SeededRandom;

TEST_CASE("seeded random: unbiased integers in range and valid Dirichlet draws", "[data][random][unit]") {
  SeededRandom rng(3);
  std::vector<int> hist(6, 0);
  for (int i = 0; i < 60000; ++i) ++hist.at(rng.below(6));
  for (int n : hist) CHECK(std::abs(n - 10000) < 500);  // about 5 standard deviations

  for (double alpha : {0.001, 0.1, 1.0, 50.0}) {
    INFO("alpha " << alpha);
    double first = 0;
    for (int i = 0; i < 200; ++i) {
      const auto p = rng.dirichlet(alpha, 5);
      double sum = 0;
      for (double x : p) {
        CHECK(std::isfinite(x));
        CHECK(x >= 0.0);
        sum += x;
      }
      CHECK(sum == Approx(1.0));
      first += p[0];
    }
    CHECK(first / 200 == Approx(0.2).margin(0.1));  // E[p_i] = 1/k for every alpha
  }
  CHECK(SeededRandom::derive(1, 0) != SeededRandom::derive(1, 1));
  CHECK(SeededRandom::derive(1, 0) == SeededRandom::derive(1, 0));
}
