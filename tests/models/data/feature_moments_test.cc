// The combination math of the federation's input scaling: moments of parts pooled exactly as if all
// rows sat in one file, per feature for tables and per channel for images.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <vector>

#include "models/data/feature_moments.h"
#include "models/data/normalization_spec.h"
#include "models/data/seeded_random.h"

using namespace meridian::models::data;
using Catch::Matchers::Contains;

namespace {

// `rows` rows of `dim` features, feature f around offset[f] with spread scale[f].
Dataset table(std::size_t rows, std::vector<double> offset, std::vector<double> scale, std::uint64_t seed) {
  Dataset d;
  d.rows = rows;
  d.dim = offset.size();
  d.classes = 2;
  SeededRandom rng(seed);
  for (std::size_t r = 0; r < rows; ++r) {
    for (std::size_t f = 0; f < d.dim; ++f)
      d.features.push_back(static_cast<float>(offset[f] + scale[f] * (rng.uniform() - 0.5)));
    d.labels.push_back(static_cast<std::int32_t>(r % 2));
  }
  return d;
}

Dataset concatenated(const std::vector<Dataset>& parts) {
  Dataset all = parts.front();
  all.features.clear();
  all.labels.clear();
  all.rows = 0;
  for (const auto& p : parts) {
    all.features.insert(all.features.end(), p.features.begin(), p.features.end());
    all.labels.insert(all.labels.end(), p.labels.begin(), p.labels.end());
    all.rows += p.rows;
  }
  return all;
}

}  // namespace

TEST_CASE("pooled moments of sites give the mean and standard deviation of all their rows together",
          "[data][normalization][unit]") {
  // Uneven parts with other ranges each, a column with a large offset (a year) and a constant one.
  const std::vector<Dataset> parts = {table(7, {1990, 5, 3}, {40, 1, 0}, 1), table(120, {2010, -2, 3}, {10, 8, 0}, 2),
                                      table(1, {2000, 100, 3}, {0, 0, 0}, 3)};
  std::vector<FeatureMoments> moments;
  for (const auto& p : parts) moments.push_back(moments_of(p));
  const auto pooled = combine(moments);
  CHECK(pooled.count == 128);
  const auto all = concatenated(parts);
  const auto from_moments = standardization_from(pooled, all);
  const auto fitted = Standardization::fit(all.features, all.dim);
  REQUIRE(from_moments.mean.size() == 3);
  for (std::size_t f = 0; f < 3; ++f) {
    INFO("feature " << f);
    CHECK(from_moments.mean[f] == Approx(fitted.mean[f]).epsilon(1e-7));
    CHECK(from_moments.stddev[f] == Approx(fitted.stddev[f]).epsilon(1e-6));
  }
  CHECK(from_moments.stddev[2] == 1.0f);  // no spread: scaled by 1, as Standardization::fit does
  // A site with no rows adds nothing.
  moments.push_back(moments_of(table(0, {0, 0, 0}, {1, 1, 1}, 4)));
  const auto with_empty = standardization_from(combine(moments), all);
  CHECK(with_empty.mean == from_moments.mean);
  CHECK(with_empty.stddev == from_moments.stddev);
}

TEST_CASE("image moments are pooled per channel and spread over the channel's pixels", "[data][normalization][unit]") {
  auto images = [](std::size_t rows, float red, float green) {
    Dataset d;
    d.rows = rows;
    d.channels = 2;
    d.height = 2;
    d.width = 3;
    d.dim = 12;
    d.classes = 1;
    for (std::size_t r = 0; r < rows; ++r) {
      for (std::size_t p = 0; p < 6; ++p) d.features.push_back(red + 0.1f * static_cast<float>(p + r));
      for (std::size_t p = 0; p < 6; ++p) d.features.push_back(green);
      d.labels.push_back(0);
    }
    return d;
  };
  const std::vector<Dataset> parts = {images(3, 0.2f, 0.5f), images(5, 0.6f, 0.9f)};
  REQUIRE(normalization_groups(parts[0]) == 2);
  const std::vector<FeatureMoments> moments = {moments_of(parts[0]), moments_of(parts[1])};
  CHECK(moments[0].count == 18);
  const auto s = standardization_from(combine(moments), parts[0]);
  REQUIRE(s.mean.size() == 12);
  // The expected per-channel values, over every pixel of every image of both parts.
  const auto all = concatenated(parts);
  for (std::size_t c = 0; c < 2; ++c) {
    double sum = 0, sq = 0, n = 0;
    for (std::size_t r = 0; r < all.rows; ++r)
      for (std::size_t p = 0; p < 6; ++p) sum += all.row(r)[c * 6 + p], n += 1;
    const double mean = sum / n;
    for (std::size_t r = 0; r < all.rows; ++r)
      for (std::size_t p = 0; p < 6; ++p) sq += (all.row(r)[c * 6 + p] - mean) * (all.row(r)[c * 6 + p] - mean);
    for (std::size_t p = 0; p < 6; ++p) {
      CHECK(s.mean[c * 6 + p] == Approx(mean).epsilon(1e-6));
      CHECK(s.stddev[c * 6 + p] == Approx(std::sqrt(sq / n)).epsilon(1e-6));
    }
  }
}

TEST_CASE("moments that cannot be pooled are refused with both counts", "[data][normalization][unit]") {
  const std::vector<FeatureMoments> mixed = {moments_of(table(4, {1, 2}, {1, 1}, 1)),
                                             moments_of(table(4, {1, 2, 3}, {1, 1, 1}, 2))};
  CHECK_THROWS_WITH(combine(mixed), Contains("of 3 groups cannot be combined with 2"));
  const std::vector<FeatureMoments> empty = {moments_of(table(0, {1, 2}, {1, 1}, 1))};
  CHECK_THROWS_WITH(combine(empty), Contains("no site holds any training rows"));
}

TEST_CASE("--normalize, --input-mean and --input-std are read and checked", "[data][normalization][unit]") {
  CHECK(parse_normalization_spec("auto", "", "").source == NormalizationSource::kAuto);
  CHECK(parse_normalization_spec("none", "", "").source == NormalizationSource::kNone);
  const auto given = parse_normalization_spec("auto", "0.5, 2", "0.25,1e3");
  CHECK(given.source == NormalizationSource::kGiven);
  CHECK(given.mean == std::vector<double>{0.5, 2});
  CHECK(given.stddev == std::vector<double>{0.25, 1000});
  CHECK_THROWS_WITH(parse_normalization_spec("zscore", "", ""), Contains("'zscore' is not auto, federation or none"));
  CHECK_THROWS_WITH(parse_normalization_spec("auto", "1", ""), Contains("--input-mean is given without --input-std"));
  CHECK_THROWS_WITH(parse_normalization_spec("none", "1", "2"), Contains("--normalize none asks for another"));
  CHECK_THROWS_WITH(parse_normalization_spec("auto", "1,x", "1,2"), Contains("value 2 ('x') is not a number"));
  CHECK_THROWS_WITH(parse_normalization_spec("auto", "1,2", "1"), Contains("--input-mean has 2 values, --input-std 1"));
  CHECK_THROWS_WITH(parse_normalization_spec("auto", "1", "0"), Contains("standard deviations must be positive"));

  Dataset image;
  image.channels = 1;
  image.height = image.width = 2;
  image.dim = 4;
  Dataset tab;
  tab.dim = 3;
  CHECK(normalization_source(parse_normalization_spec("auto", "", ""), image) == NormalizationSource::kNone);
  CHECK(normalization_source(parse_normalization_spec("auto", "", ""), tab) == NormalizationSource::kFederation);
  CHECK(describe_normalization(given, image) == "given, per channel: mean 0.5, 2; std 0.25, 1000");
  CHECK(describe_normalization(parse_normalization_spec("federation", "", ""), image) ==
        "from the federation, per channel");
  // Given values need one per channel here: the image has one channel, the lists two.
  CHECK_THROWS_WITH(standardization_from(given.mean, given.stddev, image),
                    Contains("has 2 means and 2 standard deviations, the data 1 channel (one value per channel)"));
  const auto one = standardization_from(std::vector<double>{0.5}, std::vector<double>{0.25}, image);
  CHECK(one.mean == std::vector<float>(4, 0.5f));
  CHECK(one.stddev == std::vector<float>(4, 0.25f));
}

TEST_CASE("missing values are left out of the moments, so the pooled mean is that of the values present",
          "[data][normalization][unit]") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Dataset a;
  a.rows = 3;
  a.dim = 2;
  a.features = {1, 10, nan, 20, 3, nan};
  Dataset b = a;
  b.rows = 2;
  b.features = {nan, nan, 8, 40};
  const std::vector<FeatureMoments> parts = {moments_of(a), moments_of(b)};
  CHECK(parts[0].missing == std::vector<std::uint64_t>{1, 1});
  CHECK(parts[1].present(0) == 1);
  const auto pooled = combine(parts);
  CHECK(pooled.count == 5);
  CHECK(pooled.missing == std::vector<std::uint64_t>{2, 2});
  const auto s = standardization_from(pooled, a);
  // Column 0: 1, 3, 8; column 1: 10, 20, 40.
  CHECK(s.mean[0] == Approx(4.0));
  CHECK(s.mean[1] == Approx(70.0 / 3));
  CHECK(s.stddev[0] == Approx(std::sqrt((9.0 + 1 + 16) / 3)));
  std::vector<float> all = {1, 10, nan, 20, 3, nan, nan, nan, 8, 40};
  const auto fitted = Standardization::fit(all, 2);
  CHECK(fitted.mean[0] == Approx(s.mean[0]));
  CHECK(fitted.stddev[1] == Approx(s.stddev[1]));
  fitted.apply(all);
  CHECK(all[2] == 0.0f);  // filled with the mean
  CHECK(all[7] == 0.0f);
  CHECK(moments_of(Dataset{}).missing.empty());
}
