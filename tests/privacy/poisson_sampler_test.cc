// Poisson sampling's statistics: each row joins a step independently with probability q, so the batch
// size is binomial and every row is chosen equally often, independently of the others.
#include <catch2/catch.hpp>

#include <array>
#include <cmath>
#include <cstdint>
#include <vector>

#include "error/error.h"
#include "privacy/poisson_sampler.h"
#include "privacy/secure_random.h"

using meridian::privacy::PoissonSampler;
using meridian::privacy::SecureRandom;

namespace {

// A fixed key, so that the test draws the same numbers every run and cannot fail by chance.
SecureRandom keyed(std::uint8_t first) {
  std::array<std::uint8_t, SecureRandom::kKeyBytes> key{};
  key[0] = first;
  return SecureRandom(key);
}

}  // namespace

TEST_CASE("Poisson sampling draws binomial batches of independent rows", "[privacy][dp][unit]") {
  SecureRandom random = keyed(1);
  constexpr std::size_t kRows = 1000, kSteps = 4000;
  const double q = 0.05;
  PoissonSampler sampler(kRows, q, random);
  std::vector<std::size_t> chosen(kRows, 0);
  double size_sum = 0.0, size_squares = 0.0;
  std::size_t both = 0, empty = 0;
  for (std::size_t step = 0; step < kSteps; ++step) {
    const auto rows = sampler.next();
    for (std::size_t i = 0; i < rows.size(); ++i) {
      REQUIRE(rows[i] < kRows);
      if (i > 0) REQUIRE(rows[i] > rows[i - 1]);  // ascending, no row twice
      ++chosen[rows[i]];
    }
    const bool first = !rows.empty() && rows[0] == 0, second = rows.size() > 1 && rows[0] == 0 && rows[1] == 1;
    both += first && second ? 1 : 0;
    empty += rows.empty() ? 1 : 0;
    size_sum += static_cast<double>(rows.size());
    size_squares += static_cast<double>(rows.size()) * static_cast<double>(rows.size());
  }
  // Batch size: binomial(1000, 0.05), mean 50 and variance 47.5; bounds at about 5 standard errors.
  const double mean = size_sum / kSteps, variance = size_squares / kSteps - mean * mean;
  CHECK(std::abs(mean - 50.0) < 0.6);
  CHECK(std::abs(variance - 47.5) < 6.0);
  CHECK(empty == 0);
  // Every row is chosen about q·steps = 200 times: Pearson's chi-square over the rows, 999 degrees of
  // freedom (mean 999, standard deviation about 45), well below 999 + 5·45.
  double chi_square = 0.0;
  for (const auto c : chosen) {
    const double expected = q * kSteps, d = static_cast<double>(c) - expected;
    chi_square += d * d / expected;
  }
  CHECK(chi_square < 1230.0);
  CHECK(chi_square > 770.0);
  // Rows 0 and 1 together in q² of the steps (10 expected): independent, not drawn without replacement
  // from a shuffled order.
  CHECK(both >= 2);
  CHECK(both <= 25);
}

TEST_CASE("Poisson sampling at rate 1 takes every row, and small rates give empty batches",
          "[privacy][dp][unit]") {
  SecureRandom random = keyed(2);
  PoissonSampler all(7, 1.0, random);
  CHECK(all.next().size() == 7);
  PoissonSampler rare(10, 0.01, random);
  std::size_t empty = 0;
  for (int i = 0; i < 1000; ++i) empty += rare.next().empty() ? 1 : 0;
  // (0.99)^10 ≈ 0.904 of the steps have no example at all.
  CHECK(empty > 850);
  CHECK(empty < 950);
  CHECK_THROWS_AS(PoissonSampler(0, 0.5, random), meridian::error::UserError);
  CHECK_THROWS_AS(PoissonSampler(10, 0.0, random), meridian::error::UserError);
  CHECK_THROWS_AS(PoissonSampler(10, 1.5, random), meridian::error::UserError);
}

TEST_CASE("secure random draws differ between generators and are standard normal", "[privacy][dp][unit]") {
  SecureRandom a, b;
  CHECK(a.next() != b.next());
  SecureRandom c = keyed(3), d = keyed(3);
  CHECK(c.next() == d.next());
  double sum = 0.0, squares = 0.0;
  constexpr int kDraws = 200000;
  for (int i = 0; i < kDraws; ++i) {
    const double x = c.gaussian();
    sum += x;
    squares += x * x;
  }
  CHECK(std::abs(sum / kDraws) < 0.015);
  CHECK(std::abs(squares / kDraws - 1.0) < 0.02);
}
