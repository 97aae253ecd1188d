// A site's data as start-up reads it: unscaled, then scaled as --normalize says, the test set with the
// training part's values.
#include <catch2/catch.hpp>

#include <fstream>

#include "daemon/site_data.h"
#include "tests/support/temp_dir.h"

using namespace meridian::daemon;
using meridian::tests::TempDir;

namespace {

SiteSettings settings_for(const TempDir& dir, const std::string& normalize, const std::string& mean = "",
                          const std::string& stddev = "") {
  std::ofstream(dir.path() / "train.csv") << "age,glucose,diagnosis\n40,100,benign\n60,140,malignant\n50,120,benign\n";
  std::ofstream(dir.path() / "test.csv") << "age,glucose,diagnosis\n50,120,malignant\n";
  SiteConfig c;
  c.name = "ohio";
  c.insecure = true;
  c.listen = "tcp://127.0.0.1:7400";
  c.train = (dir.path() / "train.csv").string();
  c.test = (dir.path() / "test.csv").string();
  c.classes = "benign,malignant,cyst";
  c.label_column = "diagnosis";
  c.normalize = normalize;
  c.input_mean = mean;
  c.input_std = stddev;
  return settings_of(c);
}

}  // namespace

TEST_CASE("a site's data is scaled as --normalize says, its test set with the same values", "[daemon][data][unit]") {
  TempDir dir;
  SECTION("from the federation: unscaled until agreed, with this part's moments to send") {
    auto data = load_site_data(settings_for(dir, "auto"));
    CHECK(data.normalization_pending);
    CHECK(data.train.features == std::vector<float>{40, 100, 60, 140, 50, 120});
    CHECK(data.train.feature_names == std::vector<std::string>{"age", "glucose"});
    CHECK(data.moments.count == 3);
    CHECK(data.moments.sum == std::vector<double>{150, 360});
    CHECK(class_counts(data.train) == "benign 2, malignant 1, cyst 0");
    apply_normalization(data, {{50, 120}, {10, 20}});
    CHECK_FALSE(data.normalization_pending);
    CHECK(data.train.features == std::vector<float>{-1, -1, 1, 1, 0, 0});
    CHECK(data.test.features == std::vector<float>{0, 0});
    CHECK(data.test.standardization.mean == std::vector<float>{50, 120});
  }
  SECTION("given: applied at once") {
    const auto data = load_site_data(settings_for(dir, "auto", "50,100", "10,10"));
    CHECK_FALSE(data.normalization_pending);
    CHECK(data.train.features == std::vector<float>{-1, 0, 1, 4, 0, 2});
    CHECK(data.test.features == std::vector<float>{0, 2});
    CHECK(data.train.standardization.stddev == std::vector<float>{10, 10});
  }
  SECTION("none: as read") {
    const auto data = load_site_data(settings_for(dir, "none"));
    CHECK_FALSE(data.normalization_pending);
    CHECK(data.train.standardization.empty());
    CHECK(data.test.features == std::vector<float>{50, 120});
  }
  SECTION("given with another width: refused naming both counts") {
    CHECK_THROWS_WITH(load_site_data(settings_for(dir, "auto", "1,2,3", "1,1,1")),
                      Catch::Matchers::Contains("has 3 means and 3 standard deviations, the data 2 features"));
  }
}
