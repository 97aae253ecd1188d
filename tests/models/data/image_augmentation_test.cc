#include <catch2/catch.hpp>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <set>
#include <vector>

#include "error/error.h"
#include "models/data/image_augmentation.h"

using namespace meridian::models::data;
using Catch::Matchers::Contains;

namespace {

// `rows` images of (channels, height, width) whose every value is distinct and non-zero.
Dataset images(std::size_t rows, std::size_t channels, std::size_t height, std::size_t width) {
  Dataset d;
  d.rows = rows;
  d.channels = channels;
  d.height = height;
  d.width = width;
  d.dim = channels * height * width;
  d.classes = 3;
  d.features.resize(rows * d.dim);
  for (std::size_t i = 0; i < d.features.size(); ++i) d.features[i] = static_cast<float>(i + 1);
  d.labels.resize(rows);
  for (std::size_t r = 0; r < rows; ++r) d.labels[r] = static_cast<std::int32_t>(r % 3);
  return d;
}

// The textbook transform: pad with zeros, cut the window at (pad + dy, pad + dx), then mirror.
std::vector<float> reference(const Dataset& d, std::size_t row, std::size_t pad, const AugmentationDraw& draw) {
  const std::size_t ph = d.height + 2 * pad, pw = d.width + 2 * pad;
  std::vector<float> out(d.dim);
  for (std::size_t c = 0; c < d.channels; ++c) {
    std::vector<float> padded(ph * pw, 0.0f);
    for (std::size_t y = 0; y < d.height; ++y)
      for (std::size_t x = 0; x < d.width; ++x)
        padded[(y + pad) * pw + x + pad] = d.row(row)[(c * d.height + y) * d.width + x];
    for (std::size_t y = 0; y < d.height; ++y) {
      for (std::size_t x = 0; x < d.width; ++x) {
        const std::size_t cx = static_cast<std::size_t>(static_cast<long>(pad) + draw.dx + static_cast<long>(x));
        const std::size_t cy = static_cast<std::size_t>(static_cast<long>(pad) + draw.dy + static_cast<long>(y));
        const std::size_t ox = draw.flip ? d.width - 1 - x : x;
        out[(c * d.height + y) * d.width + ox] = padded[cy * pw + cx];
      }
    }
  }
  return out;
}

std::vector<float> batch_of(const ImageAugmentation& a, const Dataset& d, const std::vector<std::size_t>& rows,
                            std::uint64_t epoch) {
  std::vector<float> x(rows.size() * d.dim, -1.0f);
  std::vector<std::int32_t> labels(rows.size(), -1);
  a.gather(rows, epoch, x.data(), labels.data());
  for (std::size_t i = 0; i < rows.size(); ++i) CHECK(labels[i] == d.labels[rows[i]]);
  return x;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace

TEST_CASE("augmentation specs parse and print", "[data][augment][unit]") {
  CHECK(parse_augmentation_spec("none") == AugmentationSpec{});
  CHECK(parse_augmentation_spec("crop:4,flip") == AugmentationSpec{4, true});
  CHECK(parse_augmentation_spec("flip") == AugmentationSpec{0, true});
  CHECK(parse_augmentation_spec("crop:2").to_string() == "crop:2");
  CHECK(AugmentationSpec{4, true}.to_string() == "crop:4,flip");
  CHECK(AugmentationSpec{}.to_string() == "none");
  for (const char* bad :
       {"", "crop", "crop:", "crop:-1", "crop:65", "crop:2x", "flip,flip", "crop:1,crop:2", "rotate", "flip,"}) {
    INFO(bad);
    CHECK_THROWS_AS(parse_augmentation_spec(bad), meridian::error::UserError);
  }
  CHECK_THROWS_WITH(parse_augmentation_spec("rotate"), Contains("'rotate' is not known") && Contains("crop:4,flip"));
}

TEST_CASE("augmentation matches pad, crop and flip done by hand on tiny images", "[data][augment][unit]") {
  const std::size_t channels = GENERATE(1, 3);
  const std::size_t pad = GENERATE(1, 2);
  const Dataset d = images(200, channels, 3, 4);
  const ImageAugmentation a(d, {pad, true}, 7);
  std::vector<std::size_t> rows(d.rows);
  for (std::size_t i = 0; i < rows.size(); ++i) rows[i] = (i * 37) % d.rows;  // any order
  const auto x = batch_of(a, d, rows, 5);
  std::set<int> dxs, dys;
  std::size_t flips = 0;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const AugmentationDraw draw = a.draw(5, rows[i]);
    CHECK(std::abs(draw.dx) <= static_cast<int>(pad));
    CHECK(std::abs(draw.dy) <= static_cast<int>(pad));
    dxs.insert(draw.dx);
    dys.insert(draw.dy);
    flips += draw.flip ? 1 : 0;
    const std::vector<float> got(x.begin() + static_cast<long>(i * d.dim),
                                 x.begin() + static_cast<long>((i + 1) * d.dim));
    CHECK(got == reference(d, rows[i], pad, draw));
  }
  // Every offset occurs, and both orientations.
  CHECK(dxs.size() == 2 * pad + 1);
  CHECK(dys.size() == 2 * pad + 1);
  CHECK(flips > 50);
  CHECK(flips < 150);
}

TEST_CASE("augmentation with a fixed draw moves and mirrors pixels as stated", "[data][augment][unit]") {
  // One 1x2x3 image: 1 2 3 / 4 5 6. Found among rows: a draw with dx = 1, dy = 0 and a flip.
  Dataset d = images(512, 1, 2, 3);
  for (std::size_t r = 0; r < d.rows; ++r)
    for (std::size_t i = 0; i < 6; ++i) d.features[r * 6 + i] = static_cast<float>(i + 1);
  const ImageAugmentation a(d, {1, true}, 11);
  std::size_t row = d.rows;
  for (std::size_t r = 0; r < d.rows && row == d.rows; ++r) {
    if (a.draw(0, r) == AugmentationDraw{1, 0, true}) row = r;
  }
  REQUIRE(row < d.rows);
  // Shifted left by one: 2 3 0 / 5 6 0; mirrored: 0 3 2 / 0 6 5.
  CHECK(batch_of(a, d, {row}, 0) == std::vector<float>{0, 3, 2, 0, 6, 5});
}

TEST_CASE("augmentation is reproducible: same seed and epoch give the same bits", "[data][augment][unit]") {
  const Dataset d = images(50, 3, 8, 8);
  const std::vector<std::size_t> rows = {3, 14, 15, 9, 26, 5, 35, 8, 9, 7};
  const ImageAugmentation a(d, {2, true}, 42), again(d, {2, true}, 42), other_seed(d, {2, true}, 43);
  const auto first = batch_of(a, d, rows, 3);
  CHECK(same_bits(first, batch_of(a, d, rows, 3)));
  CHECK(same_bits(first, batch_of(again, d, rows, 3)));
  CHECK_FALSE(same_bits(first, batch_of(other_seed, d, rows, 3)));
  CHECK_FALSE(same_bits(first, batch_of(a, d, rows, 4)));
  // A row's transform does not depend on the batch it is in: gathered alone, row 26 comes out the same.
  const auto alone = batch_of(a, d, {26}, 3);
  CHECK(std::memcmp(alone.data(), first.data() + 4 * d.dim, d.dim * sizeof(float)) == 0);
}

TEST_CASE("augmentation off is a plain copy, and needs images when on", "[data][augment][unit]") {
  const Dataset d = images(4, 1, 3, 3);
  const ImageAugmentation off(d, {}, 1);
  std::vector<float> expected(d.row(2), d.row(2) + 9);
  expected.insert(expected.end(), d.row(0), d.row(0) + 9);
  CHECK(same_bits(batch_of(off, d, {2, 0}, 9), expected));
  Dataset table = d;
  table.channels = table.height = table.width = 0;
  CHECK_NOTHROW(ImageAugmentation(table, {}, 1));
  CHECK_THROWS_WITH(ImageAugmentation(table, {0, true}, 1),
                    Contains("augmentation flip needs images") && Contains("table of 9 features per row"));
  CHECK_THROWS_WITH(ImageAugmentation(d, {3, false}, 1), Contains("the padding must be below the image size (3x3)"));
}
