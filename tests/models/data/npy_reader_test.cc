#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

#include "models/data/npy_reader.h"
#include "tests/models/data/gzip_bytes.h"
#include "tests/models/data/npy_bytes.h"
#include "tests/support/file_contents.h"
#include "tests/support/temp_dir.h"

using namespace meridian::models::data;
using Catch::Matchers::Contains;
using meridian::tests::gzip_bytes;
using meridian::tests::npy_bytes;
using meridian::tests::raw_bytes;
using meridian::tests::TempDir;
using meridian::tests::write_zip;

namespace {

// Two rows of three float32 features; labels 1 and 0.
const std::vector<float> kTable = {0.5f, -1.0f, 2.0f, 3.0f, 4.0f, -5.5f};
const std::string kTableNpy = npy_bytes("<f4", "(2, 3)", raw_bytes(kTable));
const std::string kLabelsNpy = npy_bytes("<i8", "(2,)", raw_bytes(std::vector<std::int64_t>{1, 0}));

// Pixel value of image n, channel c, row y, column x: distinct for every element, below 256.
unsigned char pixel(std::size_t n, std::size_t c, std::size_t y, std::size_t x) {
  return static_cast<unsigned char>(100 * n + 30 * c + 4 * y + x);
}

NpyOptions with_layout(ArrayLayout layout) {
  NpyOptions o;
  o.layout = layout;
  return o;
}

}  // namespace

TEST_CASE("npy reader reads a float32 table with integer labels", "[data][npy][unit]") {
  TempDir dir;
  const Dataset d = read_npy(dir.write("x.npy", kTableNpy), dir.write("y.npy", kLabelsNpy));
  CHECK(d.rows == 2);
  CHECK(d.dim == 3);
  CHECK(d.channels == 0);
  CHECK(d.features == kTable);
  CHECK(d.labels == std::vector<std::int32_t>{1, 0});
  CHECK(d.classes == 2);
  CHECK(d.class_names == std::vector<std::string>{"0", "1"});
  CHECK(d.standardization.empty());
}

TEST_CASE("npy reader reads float64, big-endian and gzip-compressed arrays alike", "[data][npy][unit]") {
  TempDir dir;
  std::vector<double> wide(kTable.begin(), kTable.end());
  std::string big;  // '>f4': each float's bytes reversed
  for (const float f : kTable) {
    const std::string b = raw_bytes(std::vector<float>{f});
    big.append(b.rbegin(), b.rend());
  }
  const std::string big_labels = std::string("\0\0\0\x01\0\0\0\0", 8);  // '>i4' 1, 0
  const auto which = GENERATE(0, 1, 2);
  std::string x, y;
  if (which == 0) {
    x = dir.write("x.npy", npy_bytes("<f8", "(2, 3)", raw_bytes(wide)));
    y = dir.write("y.npy", npy_bytes("<u2", "(2, 1)", raw_bytes(std::vector<std::uint16_t>{1, 0})));
  } else if (which == 1) {
    x = dir.write("x.npy", npy_bytes(">f4", "(2, 3)", big));
    y = dir.write("y.npy", npy_bytes(">i4", "(2,)", big_labels));
  } else {
    x = dir.write("x.npy", gzip_bytes(npy_bytes("<f4", "(2, 3)", raw_bytes(kTable), "False", 2)));
    y = dir.write("y.npy", gzip_bytes(kLabelsNpy));
  }
  const Dataset d = read_npy(x, y);
  CHECK(d.features == kTable);
  CHECK(d.labels == std::vector<std::int32_t>{1, 0});
}

TEST_CASE("npy reader scales uint8 images to [0, 1] and reads N x H x W as one channel", "[data][npy][unit]") {
  TempDir dir;
  const std::vector<std::uint8_t> px = {0, 51, 255, 102, 10, 20, 30, 40};
  const Dataset d =
      read_npy(dir.write("x.npy", npy_bytes("|u1", "(2, 2, 2)", raw_bytes(px))), dir.write("y.npy", kLabelsNpy));
  CHECK(d.channels == 1);
  CHECK(d.height == 2);
  CHECK(d.width == 2);
  CHECK(d.dim == 4);
  CHECK(d.row(0)[1] == Approx(0.2f));
  CHECK(d.row(0)[2] == 1.0f);
  CHECK(d.row(1)[3] == Approx(40.0f / 255.0f));
}

TEST_CASE("npy reader turns nchw and nhwc arrays into the same channel-major rows", "[data][npy][unit]") {
  TempDir dir;
  constexpr std::size_t n = 2, c = 3, h = 2, w = 3;
  std::vector<std::uint8_t> nchw, nhwc;
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t ch = 0; ch < c; ++ch)
      for (std::size_t y = 0; y < h; ++y)
        for (std::size_t x = 0; x < w; ++x) nchw.push_back(pixel(i, ch, y, x));
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t y = 0; y < h; ++y)
      for (std::size_t x = 0; x < w; ++x)
        for (std::size_t ch = 0; ch < c; ++ch) nhwc.push_back(pixel(i, ch, y, x));
  const auto labels = dir.write("y.npy", kLabelsNpy);
  const Dataset a = read_npy(dir.write("a.npy", npy_bytes("|u1", "(2, 3, 2, 3)", raw_bytes(nchw))), labels,
                             with_layout(ArrayLayout::kNchw));
  const Dataset b = read_npy(dir.write("b.npy", npy_bytes("|u1", "(2, 2, 3, 3)", raw_bytes(nhwc))), labels,
                             with_layout(ArrayLayout::kNhwc));
  for (const Dataset* d : {&a, &b}) {
    CHECK(d->channels == 3);
    CHECK(d->height == 2);
    CHECK(d->width == 3);
    CHECK(d->dim == 18);
  }
  CHECK(a.features == b.features);
  // Row 1, channel 2, y 1, x 2 sits at 2*6 + 1*3 + 2 in the row.
  CHECK(b.row(1)[17] == Approx(pixel(1, 2, 1, 2) / 255.0f));
}

TEST_CASE("npy reader maps text labels through the class list", "[data][npy][unit]") {
  TempDir dir;
  const auto x = dir.write("x.npy", kTableNpy);
  // '<U6': six UTF-32 characters per label, NUL-padded; '|S6': six bytes.
  auto utf32 = [](const std::string& s) {
    std::string out;
    for (std::size_t i = 0; i < 6; ++i) {
      out += i < s.size() ? s[i] : '\0';
      out += std::string(3, '\0');
    }
    return out;
  };
  const bool wide = GENERATE(true, false);
  const std::string text = wide ? utf32("benign") + utf32("tumor") : std::string("benign") + std::string("tumor\0", 6);
  const auto y = dir.write("y.npy", npy_bytes(wide ? "<U6" : "|S6", "(2,)", text));

  const Dataset derived = read_npy(x, y);
  CHECK(derived.class_names == std::vector<std::string>{"benign", "tumor"});
  CHECK(derived.labels == std::vector<std::int32_t>{0, 1});

  NpyOptions fixed;
  fixed.class_names = {"tumor", "other", "benign"};
  const Dataset d = read_npy(x, y, fixed);
  CHECK(d.classes == 3);
  CHECK(d.labels == std::vector<std::int32_t>{2, 0});

  fixed.class_names = {"tumor"};
  CHECK_THROWS_WITH(read_npy(x, y, fixed),
                    Contains(y) && Contains("row 0: label 'benign' is not one of the 1 known classes: tumor"));
}

TEST_CASE("npz reader reads stored and deflated archives by array name", "[data][npy][unit]") {
  TempDir dir;
  const bool deflate = GENERATE(false, true);
  const auto path = dir.file("d.npz");
  write_zip(path, {{"images.npy", kTableNpy}, {"targets.npy", kLabelsNpy}}, deflate);
  NpyOptions o;
  o.features_key = "images";
  o.labels_key = "targets";
  const Dataset d = read_npz(path, o);
  CHECK(d.features == kTable);
  CHECK(d.labels == std::vector<std::int32_t>{1, 0});

  CHECK_THROWS_WITH(read_npz(path), Contains(path) && Contains("no array 'x' for the features") &&
                                        Contains("the archive holds: images, targets"));
}

TEST_CASE("npy reader refuses broken files, naming the file and the problem", "[data][npy][unit]") {
  TempDir dir;
  const auto labels = dir.write("y.npy", kLabelsNpy);
  const auto features = dir.write("x.npy", kTableNpy);
  auto features_error = [&](const std::string& bytes, NpyOptions options = {}) {
    const auto path = dir.write("bad.npy", bytes);
    try {
      read_npy(path, labels, options);
    } catch (const DataError& e) {
      const std::string what = e.what();
      CHECK_THAT(what, Contains(path));
      return what;
    }
    FAIL("no error for the broken features file");
    return std::string();
  };
  CHECK_THAT(features_error("PK\x03\x04 not numpy"),
             Contains("not a NumPy .npy array") && Contains("expected '\\x93NUMPY'"));
  CHECK_THAT(features_error(std::string("\x93NUMPY\x01\x00\x76", 9)), Contains("truncated") && Contains("header"));
  CHECK_THAT(features_error(kTableNpy.substr(0, 40)), Contains("truncated: the .npy header announces 118 bytes"));
  CHECK_THAT(features_error(std::string("\x93NUMPY\x07\x00", 8) + "xx"), Contains("format version 7.0 is not known"));
  CHECK_THAT(features_error(kTableNpy.substr(0, kTableNpy.size() - 4)),
             Contains("truncated: shape (2, 3) of '<f4' needs 24 bytes of data, the file holds 20"));
  CHECK_THAT(features_error(kTableNpy + "xx"),
             Contains("shape (2, 3) of '<f4' needs 24 bytes of data, the file holds 26"));
  CHECK_THAT(features_error(npy_bytes("<i8", "(2, 3)", std::string(48, '\0'))),
             Contains("features have dtype '<i8'; expected float32 ('<f4'), float64 ('<f8') or uint8 ('|u1')"));
  CHECK_THAT(features_error(npy_bytes("<f4", "(6,)", raw_bytes(kTable))),
             Contains("features have shape (6,); expected (N, F), (N, H, W), (N, C, H, W) or (N, H, W, C)"));
  CHECK_THAT(features_error(npy_bytes("|u1", "(2, 1, 1, 3)", std::string(6, '\0'))),
             Contains("state the layout of 4-D images, nchw (N, C, H, W) or nhwc (N, H, W, C)"));
  CHECK_THAT(features_error(npy_bytes("|u1", "(2, 5, 1, 1)", std::string(10, '\0')), with_layout(ArrayLayout::kNchw)),
             Contains("which as nchw has 5 channels; expected 1 or 3"));
  CHECK_THAT(features_error(kTableNpy, with_layout(ArrayLayout::kNhwc)),
             Contains("a table (N, F), but the image layout nhwc was stated"));
  CHECK_THAT(features_error(npy_bytes("<f4", "(0, 3)", "")), Contains("no rows"));
  CHECK_THAT(features_error(npy_bytes("<f4", "(2, 3)", raw_bytes(kTable), "True")),
             Contains("fortran_order is True; save a C-ordered array"));
  CHECK_THAT(features_error(npy_bytes("|O", "(2, 3)", std::string(48, '\0'))), Contains("Python objects"));
  CHECK_THAT(features_error(std::string("\x93NUMPY\x01\x00\x0c\x00{'descr': 1}", 22)),
             Contains("expected a quoted string"));
  CHECK_THAT(features_error(std::string("\x93NUMPY\x01\x00\x10\x00{'shape': (2,)}", 26)),
             Contains("header lacks 'descr'"));
  std::vector<float> nan_table = kTable;
  nan_table[4] = std::numeric_limits<float>::quiet_NaN();
  CHECK_THAT(features_error(npy_bytes("<f4", "(2, 3)", raw_bytes(nan_table))),
             Contains("row 1, value 1 (in file order) is NaN"));

  auto labels_error = [&](const std::string& bytes, NpyOptions options = {}) {
    const auto path = dir.write("bad-labels.npy", bytes);
    try {
      read_npy(features, path, options);
    } catch (const DataError& e) {
      const std::string what = e.what();
      CHECK_THAT(what, Contains(path));
      return what;
    }
    FAIL("no error for the broken labels file");
    return std::string();
  };
  CHECK_THAT(labels_error(npy_bytes("<i8", "(3,)", raw_bytes(std::vector<std::int64_t>{0, 1, 1}))),
             Contains("holds 3 labels but " + features + " holds 2 rows"));
  CHECK_THAT(labels_error(npy_bytes("<f8", "(2,)", raw_bytes(std::vector<double>{0, 1}))),
             Contains("labels have dtype '<f8'; expected integers or text"));
  CHECK_THAT(labels_error(npy_bytes("<i8", "(2, 2)", raw_bytes(std::vector<std::int64_t>{0, 1, 1, 0}))),
             Contains("labels have shape (2, 2); expected (N,) or (N, 1)"));
  CHECK_THAT(labels_error(npy_bytes("<i2", "(2,)", raw_bytes(std::vector<std::int16_t>{0, -3}))),
             Contains("label -3 of row 1 is out of range"));
  NpyOptions two;
  two.class_names = {"cat", "dog"};
  CHECK_THAT(labels_error(npy_bytes("|u1", "(2,)", std::string("\x01\x02", 2)), two),
             Contains("label 2 of row 1 is out of range (expected 0..1 for the 2 classes cat, dog)"));
  CHECK_THAT(labels_error(std::string()), Contains("not a NumPy .npy array"));

  CHECK_THROWS_WITH(read_npy(dir.file("absent.npy"), labels),
                    Contains(dir.file("absent.npy")) && Contains("cannot open"));
}

TEST_CASE("npz reader refuses archives that are not zip files or are damaged", "[data][npy][unit]") {
  TempDir dir;
  const auto good = dir.file("good.npz");
  write_zip(good, {{"x.npy", kTableNpy}, {"y.npy", kLabelsNpy}}, true);
  const std::string bytes = meridian::tests::file_contents(good);
  REQUIRE(read_npz(good).rows == 2);

  const auto not_zip = dir.write("plain.npz", kTableNpy);
  CHECK_THROWS_WITH(read_npz(not_zip), Contains(not_zip) && Contains("not a readable zip archive"));
  const auto truncated = dir.write("cut.npz", bytes.substr(0, bytes.size() / 2));
  CHECK_THROWS_WITH(read_npz(truncated), Contains(truncated) && Contains("not a readable zip archive"));
  // Damage the first entry's deflated bytes (after its 30-byte local header and name "x.npy"): the
  // inflate fails or the CRC-32 no longer matches.
  std::string damaged = bytes;
  for (std::size_t i = 40; i < 60; ++i) damaged[i] = static_cast<char>(damaged[i] ^ 0x5a);
  const auto corrupt = dir.write("corrupt.npz", damaged);
  CHECK_THROWS_WITH(read_npz(corrupt), Contains(corrupt) && Contains("entry 'x.npy'"));
  // A stored (not deflated) entry with one byte changed reads to the end and fails its CRC-32.
  const auto stored = dir.file("stored.npz");
  write_zip(stored, {{"x.npy", kTableNpy}, {"y.npy", kLabelsNpy}}, false);
  std::string flipped = meridian::tests::file_contents(stored);
  const auto at = flipped.find("fortran_order");
  REQUIRE(at != std::string::npos);
  flipped[at] = 'F';
  const auto crc = dir.write("crc.npz", flipped);
  CHECK_THROWS_WITH(read_npz(crc), Contains(crc + ": entry 'x.npy': cannot be read: CRC error"));
  // An entry that is not an .npy array is named with the archive and the array.
  const auto odd = dir.file("odd.npz");
  write_zip(odd, {{"x.npy", "hello"}, {"y.npy", kLabelsNpy}}, false);
  CHECK_THROWS_WITH(read_npz(odd), Contains(odd + ": array 'x': not a NumPy .npy array"));
}

TEST_CASE("the image layout is parsed from its name", "[data][npy][unit]") {
  CHECK(parse_array_layout("nchw") == ArrayLayout::kNchw);
  CHECK(parse_array_layout("NHWC") == ArrayLayout::kNhwc);
  CHECK_THROWS_WITH(parse_array_layout("chw"), Contains("'chw'") && Contains("nchw") && Contains("nhwc"));
}
