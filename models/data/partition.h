// Splitting one dataset across n sites for simulations: iid (a seeded shuffle dealt out evenly) or
// non-iid with label skew (for each class, Dirichlet(alpha) proportions over the sites: small alpha
// gives each site few classes, large alpha approaches iid). Every site computes the same assignment
// from the same seed and keeps only its own rows.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "models/data/dataset.h"

namespace meridian::models::data {

struct PartitionSpec {
  enum class Kind { kIid, kDirichlet };
  Kind kind = Kind::kIid;
  double alpha = 0;  // Dirichlet concentration, > 0 (kDirichlet only)

  // "iid" or "dirichlet:<alpha>", the form parse_partition_spec reads.
  std::string to_string() const;
  bool operator==(const PartitionSpec&) const = default;
};

// Parses "iid" or "dirichlet:<alpha>" with alpha a finite number > 0 (e.g. "dirichlet:0.5").
// Throws error::UserError naming the text and the accepted forms.
PartitionSpec parse_partition_spec(std::string_view text);

// The site (0..sites-1) of every row of a dataset with these labels: a function of (labels, spec,
// sites, seed) only. iid: site sizes differ by at most one. Dirichlet: class c's rows are shuffled and
// cut by proportions drawn from Dirichlet(alpha); a site left with no row takes one from the largest
// site, so every site has data. Throws DataError when there are fewer rows than sites or a label is
// outside [0, classes), error::UserError when sites == 0 or alpha <= 0.
std::vector<std::uint32_t> assign_sites(std::span<const std::int32_t> labels, std::size_t classes,
                                        const PartitionSpec& spec, std::size_t sites, std::uint64_t seed);

// The indices of the rows assign_sites() gives `site`, ascending. Throws like assign_sites, and
// error::UserError when site >= sites.
std::vector<std::size_t> rows_of_site(std::span<const std::int32_t> labels, std::size_t classes,
                                      const PartitionSpec& spec, std::size_t site, std::size_t sites,
                                      std::uint64_t seed);

// The rows of `site` (in their original order) under assign_sites(data.labels, ...).
// Throws like assign_sites, and error::UserError when site >= sites.
Dataset partition(const Dataset& data, const PartitionSpec& spec, std::size_t site, std::size_t sites,
                  std::uint64_t seed);

}  // namespace meridian::models::data
