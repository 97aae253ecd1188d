#include <catch2/catch.hpp>

#include <cstdint>
#include <filesystem>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "error/error.h"
#include "models/data/idx_reader.h"
#include "models/data/partition.h"
#include "tests/models/data/gzip_bytes.h"
#include "tests/support/fashion_mnist.h"
#include "tests/support/temp_dir.h"

using namespace meridian::models::data;
using Catch::Matchers::Contains;
using meridian::tests::gzip_bytes;
using meridian::tests::TempDir;

namespace {

void put_u32(std::string& out, std::uint32_t v) {
  out += static_cast<char>(v >> 24);
  out += static_cast<char>(v >> 16);
  out += static_cast<char>(v >> 8);
  out += static_cast<char>(v);
}

std::string idx_images(std::uint32_t count, std::uint32_t h, std::uint32_t w, const std::vector<std::uint8_t>& px,
                       std::uint32_t magic = 2051) {
  std::string out;
  put_u32(out, magic);
  put_u32(out, count);
  put_u32(out, h);
  put_u32(out, w);
  out.append(px.begin(), px.end());
  return out;
}

std::string idx_labels(const std::vector<std::uint8_t>& labels, std::uint32_t magic = 2049) {
  std::string out;
  put_u32(out, magic);
  put_u32(out, static_cast<std::uint32_t>(labels.size()));
  out.append(labels.begin(), labels.end());
  return out;
}

// Three 2x3 images whose first pixel tells them apart; labels 0, 9, 4.
const std::vector<std::uint8_t> kPixels = {0,  51, 102, 153, 204, 255,  //
                                           10, 0,  0,   0,   0,   0,    //
                                           20, 0,  0,   0,   0,   255};
const std::vector<std::uint8_t> kLabels = {0, 9, 4};

}  // namespace

TEST_CASE("IDX reader reads raw and gzip files alike", "[data][idx][unit]") {
  TempDir dir;
  const bool gz = GENERATE(false, true);
  auto encode = [&](const std::string& raw) { return gz ? gzip_bytes(raw) : raw; };
  // The names are deliberately misleading: the reader must look at the bytes, not the suffix.
  const auto images = dir.write(gz ? "images.raw" : "images.gz", encode(idx_images(3, 2, 3, kPixels)));
  const auto labels = dir.write("labels", encode(idx_labels(kLabels)));

  const Dataset d = read_idx(images, labels);
  CHECK(d.rows == 3);
  CHECK(d.dim == 6);
  CHECK(d.classes == 10);
  CHECK(d.channels == 1);
  CHECK(d.height == 2);
  CHECK(d.width == 3);
  REQUIRE(d.features.size() == 18);
  CHECK(d.row(0)[0] == 0.0f);
  CHECK(d.row(0)[1] == Approx(0.2f));
  CHECK(d.row(0)[5] == 1.0f);
  CHECK(d.row(1)[0] == Approx(10.0f / 255.0f));
  CHECK(d.row(2)[5] == 1.0f);
  CHECK(d.labels == std::vector<std::int32_t>{0, 9, 4});
}

TEST_CASE("IDX reader with a row selection keeps exactly those rows, as a subset of the whole read",
          "[data][idx][unit]") {
  TempDir dir;
  const auto images = dir.write("images.gz", gzip_bytes(idx_images(3, 2, 3, kPixels)));
  const auto labels = dir.write("labels", idx_labels(kLabels));
  const Dataset whole = read_idx(images, labels);
  std::vector<std::int32_t> seen;
  const RowSelection first_and_last = [&](std::span<const std::int32_t> all) {
    seen.assign(all.begin(), all.end());
    return std::vector<std::size_t>{0, 2};
  };
  const Dataset part = read_idx(images, labels, 10, first_and_last);
  CHECK(seen == std::vector<std::int32_t>{0, 9, 4});  // the selection sees every label
  const std::vector<std::size_t> rows{0, 2};
  const Dataset expected = whole.subset(rows);
  CHECK(part.rows == 2);
  CHECK(part.dim == 6);
  CHECK(part.height == 2);
  CHECK(part.width == 3);
  CHECK(part.labels == expected.labels);
  CHECK(part.features == expected.features);
  CHECK(part.features[6] == 20.0f * (1.0f / 255.0f));  // the last image, not the second

  const Dataset none =
      read_idx(images, labels, 10, [](std::span<const std::int32_t>) { return std::vector<std::size_t>{}; });
  CHECK(none.rows == 0);
  CHECK(none.features.empty());

  SECTION("a selection out of order or past the end is refused") {
    for (const std::vector<std::size_t>& bad :
         {std::vector<std::size_t>{2, 0}, std::vector<std::size_t>{1, 1}, std::vector<std::size_t>{3}}) {
      CHECK_THROWS_AS(read_idx(images, labels, 10, [&](std::span<const std::int32_t>) { return bad; }),
                      meridian::error::InternalError);
    }
  }
  SECTION("a truncated images file fails whatever the selection keeps") {
    std::vector<std::uint8_t> cut(kPixels.begin(), kPixels.end() - 1);
    const auto short_images = dir.write("short-images", idx_images(3, 2, 3, cut));
    CHECK_THROWS_WITH(read_idx(short_images, labels, 10, first_and_last), Contains("truncated"));
  }
}

TEST_CASE("IDX reader names the file and the problem for bad input", "[data][idx][unit]") {
  TempDir dir;
  const bool gz = GENERATE(false, true);
  INFO((gz ? "gzip" : "raw"));
  auto encode = [&](const std::string& raw) { return gz ? gzip_bytes(raw) : raw; };
  const auto good_images = dir.write("good-images", encode(idx_images(3, 2, 3, kPixels)));
  const auto good_labels = dir.write("good-labels", encode(idx_labels(kLabels)));

  SECTION("missing file") {
    const auto missing = dir.file("nope-images");
    CHECK_THROWS_WITH(read_idx(missing, good_labels), Contains(missing) && Contains("no such file"));
    CHECK_THROWS_WITH(read_idx(good_images, dir.file("nope-labels")), Contains("nope-labels"));
  }
  SECTION("wrong magic number: a labels file where the images should be") {
    CHECK_THROWS_WITH(read_idx(good_labels, good_labels),
                      Contains(good_labels) && Contains("wrong magic number 2049") && Contains("expected 2051"));
    CHECK_THROWS_WITH(read_idx(good_images, good_images),
                      Contains(good_images) && Contains("wrong magic number 2051") && Contains("expected 2049"));
  }
  SECTION("truncated images") {
    std::vector<std::uint8_t> short_px(kPixels.begin(), kPixels.end() - 4);
    const auto images = dir.write("short-images", encode(idx_images(3, 2, 3, short_px)));
    CHECK_THROWS_WITH(read_idx(images, good_labels), Contains(images) && Contains("truncated"));
  }
  SECTION("truncated header") {
    const auto images = dir.write("header-only", encode(idx_images(3, 2, 3, kPixels).substr(0, 10)));
    CHECK_THROWS_WITH(read_idx(images, good_labels), Contains(images) && Contains("truncated"));
  }
  SECTION("truncated labels") {
    const auto labels = dir.write("short-labels", encode(idx_labels(kLabels).substr(0, 10)));
    CHECK_THROWS_WITH(read_idx(good_images, labels), Contains(labels) && Contains("truncated"));
  }
  SECTION("a header announcing far more images than the file can hold fails before allocating") {
    const auto images = dir.write("huge", encode(idx_images(0xFFFFFFFFu, 0xFFFFu, 0xFFFFu, kPixels)));
    CHECK_THROWS_WITH(read_idx(images, good_labels), Contains(images) && Contains("truncated"));
  }
  SECTION("label out of range") {
    const auto labels = dir.write("bad-labels", encode(idx_labels({0, 10, 4})));
    CHECK_THROWS_WITH(read_idx(good_images, labels),
                      Contains(labels) && Contains("label 10") && Contains("out of range") && Contains("0..9"));
    // The same file is fine when the caller says there are 11 classes.
    CHECK(read_idx(good_images, labels, 11).labels[1] == 10);
  }
  SECTION("image and label counts differ") {
    const auto labels = dir.write("two-labels", encode(idx_labels({0, 1})));
    CHECK_THROWS_WITH(read_idx(good_images, labels),
                      Contains(labels) && Contains("2 labels") && Contains(good_images) && Contains("3 images"));
  }
  SECTION("bytes after the announced data") {
    const auto labels = dir.write("long-labels", encode(idx_labels(kLabels) + "x"));
    CHECK_THROWS_WITH(read_idx(good_images, labels), Contains(labels) && Contains("after the last item"));
  }
}

TEST_CASE("IDX reader rejects a gzip file cut short or corrupted", "[data][idx][unit]") {
  TempDir dir;
  const auto labels = dir.write("labels", idx_labels(kLabels));
  // Enough pixels that the compressed stream is long enough to cut in the middle of the deflate data.
  std::vector<std::uint8_t> px(200 * 28 * 28);
  for (std::size_t i = 0; i < px.size(); ++i) px[i] = static_cast<std::uint8_t>((i * 7919) % 251);
  std::vector<std::uint8_t> labels200(200, 3);
  const auto full_labels = dir.write("labels200", idx_labels(labels200));
  const std::string gz = gzip_bytes(idx_images(200, 28, 28, px));
  REQUIRE(read_idx(dir.write("whole.gz", gz), full_labels).rows == 200);

  const auto cut = dir.write("cut.gz", gz.substr(0, gz.size() / 2));
  CHECK_THROWS_WITH(read_idx(cut, full_labels), Contains(cut) && Contains("truncated"));
  // Without its 8-byte trailer (CRC and length) the data is complete but the stream is not.
  const auto no_trailer = dir.write("no-trailer.gz", gz.substr(0, gz.size() - 8));
  CHECK_THROWS_WITH(read_idx(no_trailer, full_labels), Contains(no_trailer) && Contains("truncated"));
  std::string flipped = gz;
  flipped[gz.size() - 6] = static_cast<char>(flipped[gz.size() - 6] ^ 0x55);  // inside the CRC
  const auto corrupt = dir.write("corrupt.gz", flipped);
  CHECK_THROWS_WITH(read_idx(corrupt, full_labels), Contains(corrupt));
}

TEST_CASE("Fashion-MNIST from Debian's dataset-fashion-mnist", "[data][idx][fashion][unit]") {
  MERIDIAN_SKIP_WITHOUT_FASHION_MNIST();
  const Dataset train = load_fashion_mnist(kDebianFashionMnistDir, true);
  const Dataset test = load_fashion_mnist(kDebianFashionMnistDir, false);
  CHECK(train.rows == 60000);
  CHECK(test.rows == 10000);
  for (const Dataset* d : {&train, &test}) {
    CHECK(d->dim == 784);
    CHECK(d->height == 28);
    CHECK(d->width == 28);
    CHECK(d->classes == 10);
    CHECK(d->class_names.size() == 10);
    CHECK(d->features.size() == d->rows * 784);
    CHECK(d->labels.size() == d->rows);
    // Fashion-MNIST is balanced: 6000 (train) and 1000 (test) images per class.
    std::vector<std::size_t> per_class(10, 0);
    for (auto l : d->labels) ++per_class.at(static_cast<std::size_t>(l));
    for (auto n : per_class) CHECK(n == d->rows / 10);
    const auto [lo, hi] = std::minmax_element(d->features.begin(), d->features.end());
    CHECK(*lo == 0.0f);
    CHECK(*hi == 1.0f);
  }
  CHECK(train.class_names[9] == "Ankle boot");

  // A site's part read directly is the same as the part cut from the whole set.
  const PartitionSpec spec = parse_partition_spec(GENERATE(as<std::string>{}, "iid", "dirichlet:0.5"));
  const std::vector<std::size_t> rows = rows_of_site(train.labels, 10, spec, 1, 4, 7);
  const Dataset direct = load_fashion_mnist(kDebianFashionMnistDir, true, [&](std::span<const std::int32_t> labels) {
    return rows_of_site(labels, 10, spec, 1, 4, 7);
  });
  const Dataset cut = partition(train, spec, 1, 4, 7);
  CHECK(direct.rows == rows.size());
  CHECK(direct.labels == cut.labels);
  CHECK(direct.features == cut.features);
  CHECK(direct.class_names == cut.class_names);
}

TEST_CASE("Fashion-MNIST loader names the directory and the files it wants", "[data][idx][unit]") {
  TempDir dir;
  CHECK_THROWS_WITH(load_fashion_mnist(dir.path().string(), true),
                    Contains(dir.path().string()) && Contains("train-images-idx3-ubyte.gz"));
  // Unpacked files (no .gz) are found too.
  dir.write("t10k-images-idx3-ubyte", idx_images(3, 2, 3, kPixels));
  dir.write("t10k-labels-idx1-ubyte", idx_labels(kLabels));
  CHECK(load_fashion_mnist(dir.path().string(), false).rows == 3);
}
