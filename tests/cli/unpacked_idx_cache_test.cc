#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "cli/unpacked_idx_cache.h"
#include "tests/models/data/gzip_bytes.h"
#include "tests/support/file_contents.h"
#include "tests/support/temp_dir.h"

using meridian::cli::unpacked_idx_dir;
using meridian::tests::gzip_bytes;
using meridian::tests::TempDir;
namespace fs = std::filesystem;

namespace {

const char* const kStems[] = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte",
                              "t10k-labels-idx1-ubyte"};

// The content stands in for IDX bytes: the cache copies whatever the gzip holds.
std::string content_of(const std::string& stem, int version) {
  return stem + " bytes, version " + std::to_string(version);
}

void write_sources(const TempDir& dir, int version) {
  for (const char* stem : kStems) dir.write(std::string(stem) + ".gz", gzip_bytes(content_of(stem, version)));
}

std::size_t entries(const fs::path& dir) {
  return static_cast<std::size_t>(std::distance(fs::directory_iterator(dir), fs::directory_iterator()));
}

}  // namespace

TEST_CASE("simulate's IDX cache unpacks the gzip files once and makes a new copy when a source changes",
          "[cli][data][unit]") {
  TempDir data, cache;
  write_sources(data, 1);
  std::string note;
  const fs::path first = unpacked_idx_dir(data.path(), cache.path(), note);
  CHECK(note.empty());
  REQUIRE(first != data.path());
  CHECK(first.parent_path() == cache.path());
  for (const char* stem : kStems) CHECK(meridian::tests::file_contents(first / stem) == content_of(stem, 1));
  CHECK(entries(cache.path()) == 1);  // no partial copy left beside it

  // Reused as it is: a file put into the copy is still there afterwards.
  std::ofstream(first / "marker") << "kept";
  CHECK(unpacked_idx_dir(data.path(), cache.path(), note) == first);
  CHECK(fs::exists(first / "marker"));

  // A replaced source (other size) gets its own copy.
  data.write("t10k-labels-idx1-ubyte.gz", gzip_bytes(content_of("t10k-labels-idx1-ubyte", 22)));
  const fs::path second = unpacked_idx_dir(data.path(), cache.path(), note);
  CHECK(note.empty());
  CHECK(second != first);
  CHECK(meridian::tests::file_contents(second / "t10k-labels-idx1-ubyte") == content_of("t10k-labels-idx1-ubyte", 22));
}

TEST_CASE("simulate's IDX cache leaves the sites to the original files when it cannot help", "[cli][data][unit]") {
  TempDir data, cache;
  std::string note;
  SECTION("a gzip file is missing") {
    write_sources(data, 1);
    fs::remove(data.path() / "train-images-idx3-ubyte.gz");
    CHECK(unpacked_idx_dir(data.path(), cache.path(), note) == data.path());
    CHECK_THAT(note, Catch::Matchers::Contains("train-images-idx3-ubyte.gz"));
    CHECK(entries(cache.path()) == 0);
  }
  SECTION("a gzip stream is corrupt: no copy, partial or whole, is left") {
    write_sources(data, 1);
    std::string bad = gzip_bytes(std::string(100000, 'x'));
    bad.resize(bad.size() / 2);
    data.write("t10k-images-idx3-ubyte.gz", bad);
    CHECK(unpacked_idx_dir(data.path(), cache.path(), note) == data.path());
    CHECK_FALSE(note.empty());
    CHECK(entries(cache.path()) == 0);
  }
  SECTION("the cache directory cannot be made") {
    write_sources(data, 1);
    const fs::path blocked = cache.write("a-file", "not a directory");
    CHECK(unpacked_idx_dir(data.path(), blocked / "cache", note) == data.path());
    CHECK_FALSE(note.empty());
  }
  SECTION("no cache root") {
    write_sources(data, 1);
    CHECK(unpacked_idx_dir(data.path(), fs::path(), note) == data.path());
    CHECK_FALSE(note.empty());
  }
}
