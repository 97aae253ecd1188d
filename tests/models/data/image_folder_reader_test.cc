#include <catch2/catch.hpp>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "models/data/image_file.h"
#include "models/data/image_folder_reader.h"
#include "tests/models/data/image_bytes.h"
#include "tests/support/file_contents.h"
#include "tests/support/temp_dir.h"

using namespace meridian::models::data;
using Catch::Matchers::Contains;
using meridian::tests::TempDir;
using meridian::tests::write_jpeg;
using meridian::tests::write_png;

namespace {

namespace fs = std::filesystem;

// A 3x2 (width x height) image whose pixels are `base` + their index, per channel + 40 * channel.
std::vector<unsigned char> pattern(std::size_t channels, unsigned char base, std::size_t w = 3, std::size_t h = 2) {
  std::vector<unsigned char> px;
  for (std::size_t i = 0; i < w * h; ++i)
    for (std::size_t c = 0; c < channels; ++c) px.push_back(static_cast<unsigned char>(base + i + 40 * c));
  return px;
}

std::string in(const TempDir& dir, const std::string& relative) {
  const fs::path p = dir.path() / relative;
  fs::create_directories(p.parent_path());
  return p.string();
}

std::string error_of(const std::string& dir, const ImageFolderOptions& options = {}) {
  try {
    read_image_folder(dir, options);
  } catch (const DataError& e) {
    return e.what();
  }
  FAIL("no error for " << dir);
  return {};
}

}  // namespace

TEST_CASE("image folder reader reads grayscale PNGs by class, then file name", "[data][images][unit]") {
  TempDir dir;
  write_png(in(dir, "b_dog/2.png"), 3, 2, 1, pattern(1, 50));
  write_png(in(dir, "b_dog/1.png"), 3, 2, 1, pattern(1, 10));
  write_png(in(dir, "a_cat/x.PNG"), 3, 2, 1, pattern(1, 200));
  std::ofstream(in(dir, "README.txt")) << "files beside the class folders are ignored";
  std::ofstream(in(dir, "a_cat/.DS_Store")) << "hidden files too";

  const Dataset d = read_image_folder(dir.path().string());
  CHECK(d.class_names == std::vector<std::string>{"a_cat", "b_dog"});
  CHECK(d.classes == 2);
  CHECK(d.rows == 3);
  CHECK(d.channels == 1);
  CHECK(d.height == 2);
  CHECK(d.width == 3);
  CHECK(d.dim == 6);
  CHECK(d.labels == std::vector<std::int32_t>{0, 1, 1});
  CHECK(d.row(0)[0] == Approx(200 / 255.0f));
  CHECK(d.row(1)[0] == Approx(10 / 255.0f));  // 1.png before 2.png
  CHECK(d.row(2)[5] == Approx(55 / 255.0f));
}

TEST_CASE("image folder reader reads RGB channel-major and makes gray images RGB when any is colour",
          "[data][images][unit]") {
  TempDir dir;
  write_png(in(dir, "c/rgb.png"), 3, 2, 3, pattern(3, 20));
  write_png(in(dir, "c/gray.png"), 3, 2, 1, pattern(1, 90));
  const Dataset d = read_image_folder(dir.path().string());
  REQUIRE(d.channels == 3);
  CHECK(d.dim == 18);
  // gray.png sorts first: its value in all three channels.
  for (std::size_t c = 0; c < 3; ++c) CHECK(d.row(0)[c * 6 + 4] == Approx(94 / 255.0f));
  // rgb.png: channel c of pixel i is 20 + i + 40c, stored at c * 6 + i.
  CHECK(d.row(1)[0 * 6 + 5] == Approx(25 / 255.0f));
  CHECK(d.row(1)[1 * 6 + 5] == Approx(65 / 255.0f));
  CHECK(d.row(1)[2 * 6 + 0] == Approx(100 / 255.0f));

  ImageFolderOptions gray;
  gray.channels = 1;
  const Dataset g = read_image_folder(dir.path().string(), gray);
  CHECK(g.channels == 1);
  CHECK(g.dim == 6);
  CHECK(g.row(0)[4] == Approx(94 / 255.0f));
  // Luma of (25, 65, 105) lies between its darkest and brightest channel.
  CHECK(g.row(1)[5] > 25 / 255.0f);
  CHECK(g.row(1)[5] < 105 / 255.0f);
}

TEST_CASE("image folder reader composites PNG alpha onto black", "[data][images][unit]") {
  TempDir dir;
  write_png(in(dir, "c/a.png"), 1, 1, 2, {200, 0});    // fully transparent
  write_png(in(dir, "c/b.png"), 1, 1, 2, {200, 255});  // opaque
  const Dataset d = read_image_folder(dir.path().string());
  CHECK(d.row(0)[0] == 0.0f);
  CHECK(d.row(1)[0] == Approx(200 / 255.0f));
}

TEST_CASE("image folder reader decodes JPEG, grayscale and colour", "[data][images][unit]") {
  TempDir dir;
  // Flat images survive JPEG at quality 100 within a step or two of the 8-bit value.
  write_jpeg(in(dir, "gray/a.jpg"), 8, 8, 1, std::vector<unsigned char>(64, 120));
  std::vector<unsigned char> red;
  for (int i = 0; i < 64; ++i) red.insert(red.end(), {200, 30, 60});
  write_jpeg(in(dir, "red/b.JPEG"), 8, 8, 3, red);
  const Dataset d = read_image_folder(dir.path().string());
  REQUIRE(d.channels == 3);
  CHECK(d.height == 8);
  CHECK(d.labels == std::vector<std::int32_t>{0, 1});
  CHECK(d.row(0)[0] == Approx(120 / 255.0f).margin(2 / 255.0));
  CHECK(d.row(0)[64 + 10] == Approx(120 / 255.0f).margin(2 / 255.0));
  CHECK(d.row(1)[0] == Approx(200 / 255.0f).margin(3 / 255.0));
  CHECK(d.row(1)[64] == Approx(30 / 255.0f).margin(3 / 255.0));
  CHECK(d.row(1)[128] == Approx(60 / 255.0f).margin(3 / 255.0));
}

TEST_CASE("image folder reader maps subfolders through a fixed class list", "[data][images][unit]") {
  TempDir dir;
  write_png(in(dir, "malignant/a.png"), 3, 2, 1, pattern(1, 0));
  ImageFolderOptions o;
  o.class_names = {"benign", "malignant", "other"};
  const Dataset d = read_image_folder(dir.path().string(), o);
  CHECK(d.classes == 3);
  CHECK(d.labels == std::vector<std::int32_t>{1});

  write_png(in(dir, "unknown/b.png"), 3, 2, 1, pattern(1, 0));
  CHECK_THAT(error_of(dir.path().string(), o),
             Contains(dir.file("unknown")) &&
                 Contains("subfolder 'unknown' is not one of the 3 classes: benign, malignant, other"));
}

TEST_CASE("image folder reader refuses images of different sizes, listing them", "[data][images][unit]") {
  TempDir dir;
  for (int i = 0; i < 3; ++i) write_png(in(dir, "a/" + std::to_string(i) + ".png"), 3, 2, 1, pattern(1, 0));
  write_png(in(dir, "b/wide.png"), 4, 2, 1, pattern(1, 0, 4, 2));
  write_jpeg(in(dir, "b/tall.jpg"), 3, 5, 1, std::vector<unsigned char>(15, 9));
  const std::string what = error_of(dir.path().string());
  CHECK_THAT(what, Contains(dir.path().string() + ": 2 of 5 images differ from the size most of them have (3x2") &&
                       Contains(dir.file("b/tall.jpg") + " is 3x5") && Contains(dir.file("b/wide.png") + " is 4x2") &&
                       Contains("resize or remove them"));

  TempDir many;
  for (int i = 0; i < 15; ++i) write_png(in(many, "a/big" + std::to_string(i) + ".png"), 2, 2, 1, pattern(1, 0, 2, 2));
  for (int i = 0; i < 16; ++i) write_png(in(many, "b/" + std::to_string(i) + ".png"), 3, 2, 1, pattern(1, 0));
  CHECK_THAT(error_of(many.path().string()), Contains("15 of 31 images") && Contains("is 2x2, and 5 more"));
}

TEST_CASE("image folder reader refuses unreadable images and odd folder contents", "[data][images][unit]") {
  TempDir dir;
  const std::string root = dir.path().string();
  CHECK_THAT(error_of(dir.file("absent")), Contains(dir.file("absent") + ": no such folder"));
  CHECK_THAT(error_of(root), Contains(root + ": holds no class subfolder"));
  fs::create_directories(dir.path() / "empty");
  CHECK_THAT(error_of(root), Contains(root + ": the class subfolders hold no images"));

  write_png(in(dir, "a/good.png"), 8, 8, 1, std::vector<unsigned char>(64, 1));
  write_jpeg(in(dir, "a/good2.jpg"), 8, 8, 1, std::vector<unsigned char>(64, 1));
  const std::string png = meridian::tests::file_contents(dir.file("a/good.png"));
  const std::string jpeg = meridian::tests::file_contents(dir.file("a/good2.jpg"));
  REQUIRE(read_image_folder(root).rows == 2);

  struct Broken {
    std::string name, bytes, expected;
  };
  const std::vector<Broken> broken = {
      {"a/text.png", "this is not an image", "neither PNG nor JPEG"},
      {"a/empty.jpg", "", "the file is empty"},
      {"a/cut-header.png", png.substr(0, 20), "unreadable image"},
      {"a/cut-pixels.png", png.substr(0, png.size() - 20), "unreadable image"},
      {"a/cut-header.jpg", jpeg.substr(0, 30), "unreadable image"},
      {"a/cut-pixels.jpg", jpeg.substr(0, jpeg.size() - 40), "unreadable image"},
  };
  for (const Broken& b : broken) {
    INFO(b.name);
    const std::string path = dir.write(b.name, b.bytes);
    CHECK_THAT(error_of(root), Contains(path + ": ") && Contains(b.expected));
    fs::remove(path);
  }
  const std::string notes = dir.write("a/notes.txt", "x");
  CHECK_THAT(error_of(root), Contains(notes + ": not an image file name"));
  fs::remove(notes);
  fs::create_directories(dir.path() / "a" / "nested");
  CHECK_THAT(error_of(root), Contains(dir.file("a/nested") + ": a folder inside the class folder 'a'"));
  fs::remove(dir.path() / "a" / "nested");
  ImageFolderOptions two;
  two.channels = 2;
  CHECK_THAT(error_of(root, two), Contains("cannot read images as 2 channels"));
  REQUIRE(read_image_folder(root).rows == 2);
}
