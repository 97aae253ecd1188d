// Which LinkSpec applies between two sites: either one spec for every link, or a matrix of regions
// such as the `world4` preset of docs/wan-emulation.md (Oregon, Ohio, London, Tokyo: the regions of the DTS
// paper, one-way latency = half the measured round trips, 1 ms between sites of one region).
// Text forms (--wan): "" (no emulation), a link spec ("latency=120ms,bandwidth=50mbit", see
// link_spec.h), or "world4" optionally followed by jitter/bandwidth/loss fields that apply to every
// link ("world4,bandwidth=20mbit,jitter=5ms").
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "peer/link_spec.h"

namespace meridian::peer {

// Immutable after construction; safe to share between threads for reading.
class WanModel {
 public:
  // No emulation: one region, every link LinkSpec{}.
  WanModel();

  // One region ("all") whose links all follow `link`.
  static WanModel uniform(const LinkSpec& link);

  // The world4 preset. `extra`'s jitter, bandwidth and loss are applied to every link; its latency
  // must be 0 (the preset fixes latencies), else error::UserError.
  static WanModel world4(const LinkSpec& extra = {});

  std::size_t regions() const { return names_.size(); }
  // Throws std::out_of_range for region >= regions().
  const std::string& region_name(std::size_t region) const { return names_.at(region); }
  // The index of a region by name, or nullopt.
  std::optional<std::size_t> region_index(std::string_view name) const;

  // The region of the i-th site of a simulation: i % regions(), so sites spread evenly over regions.
  std::size_t region_of_site(std::size_t site_index) const { return site_index % regions(); }

  // The link from a site in `from_region` to a site in `to_region`. Throws error::InternalError for a
  // region >= regions().
  const LinkSpec& link(std::size_t from_region, std::size_t to_region) const;
  // The same by region names; throws error::UserError naming an unknown region and the known ones.
  const LinkSpec& link(std::string_view from_region, std::string_view to_region) const;

  // Whether any link adds delay, a bandwidth limit or loss.
  bool emulates() const;

  // The text this model was parsed from, in canonical form ("" when there is no emulation).
  const std::string& spec() const { return spec_; }

 private:
  WanModel(std::vector<std::string> names, std::vector<LinkSpec> links, std::string spec);

  std::vector<std::string> names_;
  std::vector<LinkSpec> links_;  // (regions, regions), row = from, column = to
  std::string spec_;
};

// Parses the text forms above. Throws error::UserError with a message that quotes the text and
// names the problem (whatever parse_link_spec says, or latency given to world4).
WanModel parse_wan_spec(std::string_view text);

}  // namespace meridian::peer
