// The groups of dsync (DESIGN.md §1). Ranks 0..n−1 are laid out row by row in a grid of `columns`
// columns: rank i sits at row i / columns, column i % columns. Even steps average within rows, odd
// steps within columns.
//
// The rule for choosing the grid:
// - Exact grid: when n = a·b with 2 <= a <= b <= 2a (a the largest divisor of n not above √n), the
//   grid has a rows and b columns. A row step then a column step gives everyone the exact mean.
// - Ragged grid: otherwise (n prime, like 5, 7, 13, or lopsided like 2·11), the grid has ⌈√n⌉ columns
//   and a shorter last row, so groups stay about √n in size. Everyone's information reaches everyone
//   within 3 consecutive steps from any start (the full first row reaches every column, and every row
//   has a member in column 0), though the result is a weighted rather than exact mean.
// Pure functions; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace meridian::gossip {

struct GroupGrid {
  std::size_t sites = 0;
  std::size_t columns = 0;
  bool exact = false;  // n = rows × columns with no short row

  // Steps within which every site's information reaches every other site, from any starting step.
  std::size_t reach_steps() const { return sites <= 1 ? 0 : (exact ? 2 : 3); }
};

GroupGrid group_grid_for(std::size_t n);

// The ranks (ascending, so every member derives the same ring order) averaged with `rank` at `step`.
std::vector<std::size_t> group_at(const GroupGrid& grid, std::size_t rank, std::uint64_t step);

}  // namespace meridian::gossip
