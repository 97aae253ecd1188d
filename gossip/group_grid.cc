#include "gossip/group_grid.h"

#include <algorithm>

namespace meridian::gossip {

GroupGrid group_grid_for(std::size_t n) {
  if (n <= 1) return GroupGrid{n, 1, true};
  std::size_t a = 1;
  for (std::size_t d = 1; d * d <= n; ++d)
    if (n % d == 0) a = d;
  std::size_t b = n / a;
  if (a >= 2 && b <= 2 * a) return GroupGrid{n, b, true};
  std::size_t c = 1;
  while (c * c < n) ++c;
  return GroupGrid{n, c, false};
}

GroupGrid group_grid_for(std::size_t n, const GridSpec& spec) {
  if (spec.is_auto()) return group_grid_for(n);
  if (n <= 1) return GroupGrid{n, 1, true};
  const std::size_t columns = std::min(n, static_cast<std::size_t>(std::max(spec.cols, 1)));
  return GroupGrid{n, columns, n % columns == 0};
}

std::vector<std::size_t> group_at(const GroupGrid& grid, std::size_t rank, std::uint64_t step) {
  std::vector<std::size_t> group;
  if (grid.sites == 0) return group;
  const std::size_t c = grid.columns;
  if (step % 2 == 0) {
    std::size_t row = rank / c;
    for (std::size_t i = row * c; i < std::min(grid.sites, (row + 1) * c); ++i) group.push_back(i);
  } else {
    for (std::size_t i = rank % c; i < grid.sites; i += c) group.push_back(i);
  }
  return group;
}

}  // namespace meridian::gossip
