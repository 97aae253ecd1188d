// The NumPy readers against files NumPy itself wrote (tests/models/data/numpy/make_fixtures.py):
// np.savez, np.savez_compressed and np.save, as a site would produce them.
#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "models/data/data_source.h"
#include "models/data/npy_reader.h"
#include "tests/support/build_paths.h"

using namespace meridian::models::data;

namespace {

std::string fixture(const std::string& name) {
  return std::string(meridian::tests::source_dir()) + "/tests/models/data/numpy/" + name;
}

}  // namespace

TEST_CASE("a table saved by np.savez_compressed reads back exactly", "[data][npy][unit]") {
  const Dataset d = load_dataset(fixture("table.npz"));
  REQUIRE(d.rows == 4);
  CHECK(d.dim == 3);
  CHECK(d.channels == 0);
  for (std::size_t i = 0; i < 12; ++i) CHECK(d.features[i] == (static_cast<float>(i) - 5.5f) / 4.0f);
  CHECK(d.labels == std::vector<std::int32_t>{2, 0, 1, 2});
  CHECK(d.class_names == std::vector<std::string>{"0", "1", "2"});
}

TEST_CASE("nhwc images saved by np.savez and nchw images saved by np.save agree", "[data][npy][unit]") {
  DataOptions nhwc;
  nhwc.layout = ArrayLayout::kNhwc;
  nhwc.features_key = "pixels";
  nhwc.labels_key = "names";
  const Dataset a = load_dataset(fixture("images.npz"), nhwc);
  REQUIRE(a.rows == 2);
  CHECK(a.channels == 3);
  CHECK(a.height == 2);
  CHECK(a.width == 3);
  CHECK(a.class_names == std::vector<std::string>{"benign", "tumor"});
  CHECK(a.labels == std::vector<std::int32_t>{1, 0});
  for (std::size_t n = 0; n < 2; ++n)
    for (std::size_t c = 0; c < 3; ++c)
      for (std::size_t y = 0; y < 2; ++y)
        for (std::size_t x = 0; x < 3; ++x)
          CHECK(a.row(n)[(c * 2 + y) * 3 + x] == Approx((100 * n + 30 * c + 4 * y + x) / 255.0));

  DataOptions nchw;
  nchw.layout = ArrayLayout::kNchw;
  const Dataset b = load_dataset(fixture("images_nchw.npy") + "," + fixture("labels.npy"), nchw);
  REQUIRE(b.dim == a.dim);
  CHECK(b.labels == std::vector<std::int32_t>{1, 0});
  for (std::size_t i = 0; i < a.features.size(); ++i) CHECK(b.features[i] == Approx(a.features[i]));
}
