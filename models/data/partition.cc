#include "models/data/partition.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <numeric>
#include <sstream>
#include <stdexcept>

#include "error/error.h"
#include "models/data/seeded_random.h"

namespace meridian::models::data {

namespace {

constexpr const char* kForms = "expected \"iid\" or \"dirichlet:<alpha>\" with alpha > 0, e.g. \"dirichlet:0.5\"";

// Every row starts unassigned; the value is out of the range of any real site index.
constexpr std::uint32_t kUnassigned = ~std::uint32_t{0};

void assign_iid(std::vector<std::uint32_t>& site_of, std::size_t sites, SeededRandom& rng) {
  std::vector<std::size_t> order(site_of.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  rng.shuffle(std::span(order));
  for (std::size_t i = 0; i < order.size(); ++i) site_of[order[i]] = static_cast<std::uint32_t>(i % sites);
}

void assign_dirichlet(std::vector<std::uint32_t>& site_of, std::span<const std::int32_t> labels, std::size_t classes,
                      double alpha, std::size_t sites, SeededRandom& rng) {
  std::vector<std::vector<std::size_t>> by_class(classes);
  for (std::size_t i = 0; i < labels.size(); ++i) by_class[static_cast<std::size_t>(labels[i])].push_back(i);
  std::vector<std::vector<std::size_t>> rows_of(sites);
  for (auto& rows : by_class) {
    // Drawn even for an absent class so that the stream does not depend on which classes are present.
    const std::vector<double> p = rng.dirichlet(alpha, sites);
    rng.shuffle(std::span(rows));
    // Cut points from the cumulative proportions, rounded; the last cut is the class size, so every
    // row of the class lands somewhere.
    double cumulative = 0;
    std::size_t begin = 0;
    for (std::size_t s = 0; s < sites; ++s) {
      cumulative += p[s];
      const std::size_t end =
          s + 1 == sites ? rows.size()
                         : std::min(rows.size(), static_cast<std::size_t>(std::llround(cumulative * rows.size())));
      for (std::size_t k = begin; k < std::max(begin, end); ++k) rows_of[s].push_back(rows[k]);
      begin = std::max(begin, end);
    }
  }
  // A site without data cannot train; give it one row of the largest site (lowest index on ties),
  // which changes the skew as little as possible.
  for (std::size_t s = 0; s < sites; ++s) {
    if (!rows_of[s].empty()) continue;
    const auto largest = std::max_element(rows_of.begin(), rows_of.end(),
                                          [](const auto& a, const auto& b) { return a.size() < b.size(); });
    rows_of[s].push_back(largest->back());
    largest->pop_back();
  }
  for (std::size_t s = 0; s < sites; ++s) {
    for (std::size_t r : rows_of[s]) site_of[r] = static_cast<std::uint32_t>(s);
  }
}

}  // namespace

std::string PartitionSpec::to_string() const {
  if (kind == Kind::kIid) return "iid";
  std::ostringstream s;
  s << "dirichlet:" << alpha;
  return s.str();
}

PartitionSpec parse_partition_spec(std::string_view text) {
  if (text == "iid") return {};
  constexpr std::string_view kPrefix = "dirichlet:";
  if (!text.starts_with(kPrefix)) {
    throw error::UserError("partition \"" + std::string(text) + "\": unknown kind; " + kForms);
  }
  const std::string_view number = text.substr(kPrefix.size());
  double alpha = 0;
  const auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), alpha);
  if (number.empty() || ec != std::errc() || end != number.data() + number.size() || !std::isfinite(alpha) ||
      alpha <= 0) {
    throw error::UserError("partition \"" + std::string(text) + "\": alpha \"" + std::string(number) +
                           "\" is not a number > 0; " + kForms);
  }
  return {PartitionSpec::Kind::kDirichlet, alpha};
}

std::vector<std::uint32_t> assign_sites(std::span<const std::int32_t> labels, std::size_t classes,
                                        const PartitionSpec& spec, std::size_t sites, std::uint64_t seed) {
  if (sites == 0) throw error::UserError("partition: the number of sites must be at least 1");
  if (spec.kind == PartitionSpec::Kind::kDirichlet && !(spec.alpha > 0 && std::isfinite(spec.alpha))) {
    throw error::UserError("partition: Dirichlet alpha must be a finite number > 0");
  }
  if (labels.size() < sites) {
    throw DataError("partition: " + std::to_string(labels.size()) + " rows cannot give each of " +
                    std::to_string(sites) + " sites at least one row");
  }
  for (std::size_t i = 0; i < labels.size(); ++i) {
    if (labels[i] < 0 || static_cast<std::size_t>(labels[i]) >= classes) {
      throw DataError("partition: label " + std::to_string(labels[i]) + " of row " + std::to_string(i) +
                      " is out of range (expected 0.." + std::to_string(static_cast<long long>(classes) - 1) + ")");
    }
  }
  std::vector<std::uint32_t> site_of(labels.size(), kUnassigned);
  SeededRandom rng(seed);
  if (spec.kind == PartitionSpec::Kind::kIid) {
    assign_iid(site_of, sites, rng);
  } else {
    assign_dirichlet(site_of, labels, classes, spec.alpha, sites, rng);
  }
  return site_of;
}

std::vector<std::size_t> rows_of_site(std::span<const std::int32_t> labels, std::size_t classes,
                                      const PartitionSpec& spec, std::size_t site, std::size_t sites,
                                      std::uint64_t seed) {
  if (site >= sites) {
    throw error::UserError("partition: site " + std::to_string(site) + " is out of range (0.." +
                           std::to_string(static_cast<long long>(sites) - 1) + ")");
  }
  const std::vector<std::uint32_t> site_of = assign_sites(labels, classes, spec, sites, seed);
  std::vector<std::size_t> mine;
  for (std::size_t i = 0; i < site_of.size(); ++i) {
    if (site_of[i] == site) mine.push_back(i);
  }
  return mine;
}

Dataset partition(const Dataset& data, const PartitionSpec& spec, std::size_t site, std::size_t sites,
                  std::uint64_t seed) {
  return data.subset(rows_of_site(data.labels, data.classes, spec, site, sites, seed));
}

}  // namespace meridian::models::data
