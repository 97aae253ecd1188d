#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "error/error.h"
#include "models/data/partition.h"

using namespace meridian::models::data;
using Catch::Matchers::Contains;

namespace {

// `rows` rows over `classes` balanced classes; each row's single feature is its index, so a site's
// part tells which rows it received.
Dataset numbered(std::size_t rows, std::size_t classes) {
  Dataset d;
  d.rows = rows;
  d.dim = 1;
  d.classes = classes;
  for (std::size_t i = 0; i < rows; ++i) {
    d.features.push_back(static_cast<float>(i));
    d.labels.push_back(static_cast<std::int32_t>(i % classes));
  }
  return d;
}

// Mean over sites of the total variation distance between the site's label distribution and the
// whole dataset's: 0 for a perfect iid split, near 1 - 1/classes when every site has one class.
double label_skew(const std::vector<std::uint32_t>& site_of, const std::vector<std::int32_t>& labels,
                  std::size_t classes, std::size_t sites) {
  std::vector<std::vector<double>> count(sites, std::vector<double>(classes, 0));
  std::vector<double> global(classes, 0);
  for (std::size_t i = 0; i < labels.size(); ++i) {
    count[site_of[i]][static_cast<std::size_t>(labels[i])] += 1;
    global[static_cast<std::size_t>(labels[i])] += 1;
  }
  double total = 0;
  for (const auto& c : count) {
    const double n = std::accumulate(c.begin(), c.end(), 0.0);
    double tv = 0;
    for (std::size_t k = 0; k < classes; ++k) tv += std::abs(c[k] / n - global[k] / labels.size());
    total += tv / 2;
  }
  return total / sites;
}

}  // namespace

TEST_CASE("partition specs parse, and bad ones say what is accepted", "[data][partition][unit]") {
  CHECK(parse_partition_spec("iid") == PartitionSpec{});
  const PartitionSpec d = parse_partition_spec("dirichlet:0.5");
  CHECK(d.kind == PartitionSpec::Kind::kDirichlet);
  CHECK(d.alpha == 0.5);
  CHECK(parse_partition_spec(d.to_string()) == d);
  CHECK(parse_partition_spec("iid").to_string() == "iid");
  for (const char* bad : {"", "IID", "non-iid", "dirichlet", "dirichlet:", "dirichlet:0", "dirichlet:-1",
                          "dirichlet:abc", "dirichlet:0.5x", "dirichlet:inf", "dirichlet:nan"}) {
    INFO(bad);
    CHECK_THROWS_AS(parse_partition_spec(bad), meridian::error::UserError);
    CHECK_THROWS_WITH(parse_partition_spec(bad), Contains("\"iid\" or \"dirichlet:<alpha>\""));
  }
  CHECK_THROWS_WITH(parse_partition_spec("dirichlet:-1"), Contains("alpha \"-1\""));
}

TEST_CASE("every row goes to exactly one site and each site gets only its own part", "[data][partition][unit]") {
  const std::size_t sites = GENERATE(1, 3, 7);
  const char* spec_text = GENERATE("iid", "dirichlet:0.1", "dirichlet:10");
  INFO(spec_text << " over " << sites << " sites");
  const PartitionSpec spec = parse_partition_spec(spec_text);
  const Dataset data = numbered(1000, 10);

  std::vector<int> seen(data.rows, 0);
  std::size_t total = 0;
  for (std::size_t s = 0; s < sites; ++s) {
    const Dataset part = partition(data, spec, s, sites, 42);
    CHECK(part.rows >= 1);
    CHECK(part.dim == 1);
    CHECK(part.classes == 10);
    total += part.rows;
    for (std::size_t r = 0; r < part.rows; ++r) {
      const auto original = static_cast<std::size_t>(part.row(r)[0]);
      ++seen[original];
      CHECK(part.labels[r] == data.labels[original]);  // rows travel with their labels
    }
  }
  CHECK(total == data.rows);
  CHECK(std::all_of(seen.begin(), seen.end(), [](int n) { return n == 1; }));
}

TEST_CASE("iid parts differ in size by at most one and look like the whole", "[data][partition][unit]") {
  const Dataset data = numbered(1003, 10);
  const auto site_of = assign_sites(data.labels, 10, PartitionSpec{}, 4, 7);
  std::vector<std::size_t> sizes(4, 0);
  for (auto s : site_of) ++sizes.at(s);
  CHECK(*std::max_element(sizes.begin(), sizes.end()) - *std::min_element(sizes.begin(), sizes.end()) <= 1);
  CHECK(label_skew(site_of, data.labels, 10, 4) < 0.1);
}

TEST_CASE("a partition is reproducible from its seed", "[data][partition][unit]") {
  const Dataset data = numbered(500, 10);
  for (const auto& spec : {parse_partition_spec("iid"), parse_partition_spec("dirichlet:0.3")}) {
    INFO(spec.to_string());
    const auto a = assign_sites(data.labels, 10, spec, 5, 1234);
    CHECK(assign_sites(data.labels, 10, spec, 5, 1234) == a);
    CHECK(assign_sites(data.labels, 10, spec, 5, 1235) != a);
    CHECK(partition(data, spec, 2, 5, 1234).features == partition(data, spec, 2, 5, 1234).features);
  }
}

TEST_CASE("Dirichlet label skew grows as alpha shrinks", "[data][partition][unit]") {
  const Dataset data = numbered(5000, 10);
  const std::size_t sites = 8;
  auto mean_skew = [&](const std::string& spec_text) {
    double sum = 0;
    for (std::uint64_t seed = 1; seed <= 5; ++seed) {
      sum += label_skew(assign_sites(data.labels, 10, parse_partition_spec(spec_text), sites, seed), data.labels, 10,
                        sites);
    }
    return sum / 5;
  };
  const double iid = mean_skew("iid");
  const double a10 = mean_skew("dirichlet:10");
  const double a1 = mean_skew("dirichlet:1");
  const double a01 = mean_skew("dirichlet:0.1");
  INFO("skew iid " << iid << ", alpha 10 " << a10 << ", alpha 1 " << a1 << ", alpha 0.1 " << a01);
  // A large alpha is about as even as iid (both only show sampling noise), so the order starts there.
  CHECK(iid < a1);
  CHECK(a10 < a1);
  CHECK(a1 < a01);
  CHECK(a01 > 0.5);  // most of a site's data is from one or two classes
}

TEST_CASE("a tiny alpha still leaves every site with data", "[data][partition][unit]") {
  const Dataset data = numbered(12, 3);
  for (std::uint64_t seed = 0; seed < 20; ++seed) {
    const auto site_of = assign_sites(data.labels, 3, parse_partition_spec("dirichlet:0.01"), 10, seed);
    std::vector<std::size_t> sizes(10, 0);
    for (auto s : site_of) ++sizes.at(s);
    CHECK(std::count(sizes.begin(), sizes.end(), 0) == 0);
  }
}

TEST_CASE("partition refuses impossible requests with a clear error", "[data][partition][unit]") {
  const Dataset data = numbered(3, 2);
  CHECK_THROWS_WITH(partition(data, {}, 0, 4, 1), Contains("3 rows cannot give each of 4 sites"));
  CHECK_THROWS_AS(partition(data, {}, 0, 4, 1), DataError);
  CHECK_THROWS_AS(partition(data, {}, 3, 3, 1), meridian::error::UserError);
  CHECK_THROWS_AS(partition(data, {}, 0, 0, 1), meridian::error::UserError);
  Dataset bad = data;
  bad.labels[1] = 2;
  CHECK_THROWS_WITH(partition(bad, {}, 0, 1, 1), Contains("label 2 of row 1 is out of range"));
}
