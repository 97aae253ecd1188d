#include <catch2/catch.hpp>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "models/data/data_source.h"
#include "tests/models/data/gzip_bytes.h"
#include "tests/models/data/image_bytes.h"
#include "tests/models/data/npy_bytes.h"
#include "tests/support/temp_dir.h"

using namespace meridian::models::data;
using Catch::Matchers::Contains;
using meridian::tests::gzip_bytes;
using meridian::tests::npy_bytes;
using meridian::tests::raw_bytes;
using meridian::tests::TempDir;
using meridian::tests::write_png;
using meridian::tests::write_zip;

namespace {

namespace fs = std::filesystem;

std::string be32(std::uint32_t v) {
  return {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8), static_cast<char>(v)};
}

// IDX: three 1x2 images with labels 0, 4, 2.
std::string idx_images() {
  return be32(2051) + be32(3) + be32(1) + be32(2) + std::string("\x00\xff\x10\x20\x30\x40", 6);
}
std::string idx_labels() { return be32(2049) + be32(3) + std::string("\x00\x04\x02", 3); }

std::string text_labels(const std::vector<std::string>& labels) {
  std::string data;
  for (const auto& l : labels) data += l + std::string(8 - l.size(), '\0');
  return npy_bytes("|S8", "(" + std::to_string(labels.size()) + ",)", data);
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const DataError& e) {
    return e.what();
  }
  FAIL("no DataError");
  return {};
}

}  // namespace

TEST_CASE("the data format is taken from the path", "[data][source][unit]") {
  TempDir dir;
  fs::create_directories(dir.path() / "images" / "cat");
  const auto x = dir.write("x.npy", "");
  const auto y = dir.write("y.npy", "");
  const auto npz = dir.write("d.npz", "");
  const auto csv = dir.write("t.csv", "");
  const auto csv_gz = dir.write("t.CSV.gz", "");
  const auto images = dir.write("train-images-idx3-ubyte.gz", gzip_bytes(idx_images()));
  const auto labels = dir.write("train-labels-idx1-ubyte.gz", gzip_bytes(idx_labels()));
  const auto odd_images = dir.write("pics.bin", idx_images());
  const auto odd_labels = dir.write("tags.bin", idx_labels());

  CHECK(resolve_data_path(dir.file("images")).format == DataFormat::kImageFolder);
  CHECK(resolve_data_path(npz).format == DataFormat::kNpz);
  CHECK(resolve_data_path(csv).format == DataFormat::kCsv);
  CHECK(resolve_data_path(csv_gz).format == DataFormat::kCsv);
  const DataPath pair = resolve_data_path(x + "," + y);
  CHECK(pair.format == DataFormat::kNpy);
  CHECK(pair.path == x);
  CHECK(pair.labels_path == y);
  const DataPath idx = resolve_data_path(images);
  CHECK(idx.format == DataFormat::kIdx);
  CHECK(idx.labels_path == labels);
  const DataPath named = resolve_data_path(odd_images + "," + odd_labels);
  CHECK(named.format == DataFormat::kIdx);
  CHECK(named.labels_path == odd_labels);
  // A file whose name holds a comma is taken as written.
  const auto comma = dir.write("a,b.csv", "");
  CHECK(resolve_data_path(comma).path == comma);

  CHECK_THAT(error_of([&] { resolve_data_path(x); }),
             Contains(x + ": an .npy holds one array; name the labels too, as FEATURES.npy,LABELS.npy"));
  CHECK_THAT(error_of([&] { resolve_data_path(dir.file("nothing.npz")); }),
             Contains(dir.file("nothing.npz") + ": no such file or folder"));
  CHECK_THAT(error_of([&] { resolve_data_path(x + "," + dir.file("gone.npy")); }),
             Contains(dir.file("gone.npy") + ": no such file"));
  CHECK_THAT(error_of([&] { resolve_data_path(csv + "," + y); }),
             Contains("only .npy features and IDX images take a labels file"));
  CHECK_THAT(error_of([&] { resolve_data_path(odd_images); }),
             Contains(odd_images + ": IDX images without labels") && Contains("IMAGES,LABELS"));
  const auto lonely = dir.write("t10k-images-idx3-ubyte", idx_images());
  CHECK_THAT(error_of([&] { resolve_data_path(lonely); }),
             Contains(dir.file("t10k-labels-idx1-ubyte") + " does not exist"));
  const auto unknown = dir.write("table.xlsx", "PK");
  CHECK_THAT(error_of([&] { resolve_data_path(unknown); }),
             Contains(unknown + ": cannot tell the data format from the path") && Contains(".npz"));
  CHECK_THAT(error_of([&] { resolve_data_path(""); }), Contains("no data path given"));
}

TEST_CASE("load_dataset reads every format into a Dataset with class names", "[data][source][unit]") {
  TempDir dir;
  // The same two rows in four formats.
  const std::vector<float> table = {1, 2, 3, 4};
  dir.write("x.npy", npy_bytes("<f4", "(2, 2)", raw_bytes(table)));
  dir.write("y.npy", text_labels({"no", "yes"}));
  write_zip(dir.file("d.npz"),
            {{"x.npy", npy_bytes("<f4", "(2, 2)", raw_bytes(table))}, {"y.npy", text_labels({"no", "yes"})}}, true);
  dir.write("d.csv", "a,b,label\n1,2,no\n3,4,yes\n");
  for (const std::string& path : {dir.file("x.npy") + "," + dir.file("y.npy"), dir.file("d.npz"), dir.file("d.csv")}) {
    INFO(path);
    const Dataset d = load_dataset(path);
    CHECK(d.rows == 2);
    CHECK(d.dim == 2);
    CHECK(d.class_names == std::vector<std::string>{"no", "yes"});
    CHECK(d.labels == std::vector<std::int32_t>{0, 1});
  }

  dir.write("train-images-idx3-ubyte", idx_images());
  dir.write("train-labels-idx1-ubyte", idx_labels());
  const Dataset idx = load_dataset(dir.file("train-images-idx3-ubyte"));
  CHECK(idx.rows == 3);
  CHECK(idx.height == 1);
  CHECK(idx.width == 2);
  CHECK(idx.classes == 5);
  CHECK(idx.class_names == std::vector<std::string>{"0", "1", "2", "3", "4"});
  DataOptions three;
  three.class_names = {"a", "b", "c"};
  CHECK_THAT(error_of([&] { load_dataset(dir.file("train-images-idx3-ubyte"), three); }),
             Contains(dir.file("train-labels-idx1-ubyte") + ": label 4 of item 1 is out of range (expected 0..2)"));

  DataOptions some;
  some.select = [](std::span<const std::int32_t> labels) {
    std::vector<std::size_t> kept;
    for (std::size_t i = 0; i < labels.size(); ++i)
      if (labels[i] != 4) kept.push_back(i);
    return kept;
  };
  CHECK(load_dataset(dir.file("train-images-idx3-ubyte"), some).labels == std::vector<std::int32_t>{0, 2});
  // Every site of a split sees the same classes, whatever its own rows hold.
  CHECK(load_dataset(dir.file("train-images-idx3-ubyte"), some).classes == 5);
  CHECK(load_dataset(dir.file("d.csv"), some).rows == 2);
}

TEST_CASE("load_train_and_test reads the test set with the training set's classes and checks shapes",
          "[data][source][unit]") {
  TempDir dir;
  const std::string train = dir.file("train.npz"), test = dir.file("test.npz");
  write_zip(
      train,
      {{"x.npy", npy_bytes("|u1", "(3, 2, 2)", std::string(12, '\x10'))}, {"y.npy", text_labels({"b", "c", "a"})}},
      false);
  // The test file holds only class 'c': it still maps to the training set's label 2.
  write_zip(test, {{"x.npy", npy_bytes("|u1", "(1, 2, 2)", std::string(4, '\x20'))}, {"y.npy", text_labels({"c"})}},
            false);
  const TrainAndTest both = load_train_and_test(train, test);
  CHECK(both.train.class_names == std::vector<std::string>{"a", "b", "c"});
  CHECK(both.test.class_names == both.train.class_names);
  CHECK(both.test.labels == std::vector<std::int32_t>{2});
  CHECK(load_train_and_test(train, "").test.rows == 0);

  const std::string wide = dir.file("wide.npz");
  write_zip(wide, {{"x.npy", npy_bytes("|u1", "(1, 2, 3)", std::string(6, '\x20'))}, {"y.npy", text_labels({"a"})}},
            false);
  CHECK_THAT(error_of([&] { load_train_and_test(train, wide); }),
             Contains(wide + ": 6 features per row (images 1x2x3, channels x height x width), but " + train +
                      " has 4 features per row (images 1x2x2"));
  const std::string other = dir.file("other.npz");
  write_zip(other, {{"x.npy", npy_bytes("|u1", "(1, 2, 2)", std::string(4, '\x20'))}, {"y.npy", text_labels({"d"})}},
            false);
  CHECK_THAT(error_of([&] { load_train_and_test(train, other); }),
             Contains(other + ": array 'y': row 0: label 'd' is not one of the 3 known classes: a, b, c"));

  // An image folder test set takes the training set's channel count.
  fs::create_directories(dir.path() / "rgb" / "a");
  fs::create_directories(dir.path() / "gray" / "a");
  write_png(dir.file("rgb/a/1.png"), 2, 2, 3, std::vector<unsigned char>(12, 50));
  write_png(dir.file("gray/a/1.png"), 2, 2, 1, std::vector<unsigned char>(4, 50));
  const TrainAndTest images = load_train_and_test(dir.file("rgb"), dir.file("gray"));
  CHECK(images.test.channels == 3);
  CHECK(images.test.dim == 12);
}

TEST_CASE("a class list is parsed from its comma-separated form", "[data][source][unit]") {
  CHECK(parse_class_list("benign, malignant ,other") == std::vector<std::string>{"benign", "malignant", "other"});
  CHECK(parse_class_list("one") == std::vector<std::string>{"one"});
  CHECK_THROWS_WITH(parse_class_list(""), Contains("class 1 has no name"));
  CHECK_THROWS_WITH(parse_class_list("a,,b"), Contains("'a,,b': class 2 has no name"));
  CHECK_THROWS_WITH(parse_class_list("a,b,a"), Contains("'a' is given twice"));
}

TEST_CASE("the old CSV options are read as --train and --test, with a warning naming them", "[data][source][unit]") {
  std::string train, test;
  auto fold = fold_legacy_csv_names(train, test, "a.csv", "b.csv");
  CHECK(train == "a.csv");
  CHECK(test == "b.csv");
  CHECK(fold.problems.empty());
  CHECK(fold.warning == "--train-csv a.csv --test-csv b.csv is deprecated: name the data as --train a.csv --test b.csv "
                        "(the same options for every format, docs/datasets.md; --dataset csv is then not needed)");

  std::string same = "a.csv", none;
  fold = fold_legacy_csv_names(same, none, "a.csv", "");
  CHECK(fold.problems.empty());
  CHECK(none.empty());

  std::string other = "c.csv";
  fold = fold_legacy_csv_names(other, none, "a.csv", "");
  CHECK(other == "c.csv");
  REQUIRE(fold.problems.size() == 1);
  CHECK(fold.problems[0] == "--train-csv: names a.csv but --train names c.csv: give only --train (--train-csv is its "
                            "old name)");

  std::string untouched;
  CHECK(fold_legacy_csv_names(untouched, none, "", "").warning.empty());
}
