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
// - A fixed grid (--grid ROWSxCOLS): COLS columns, whatever n is. With n = ROWS·COLS sites it is exact;
//   when the view has another size (a site left or joined) the last row is short, or, with fewer than
//   COLS sites, there is one row. Information then reaches everyone within 3 steps, as for the ragged
//   grid above.
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

// How dsync's grid is chosen: both 0 ("auto") for the rule above, else ROWSxCOLS as given.
struct GridSpec {
  int rows = 0, cols = 0;

  bool is_auto() const { return rows == 0 && cols == 0; }
  bool operator==(const GridSpec&) const = default;
};

// The automatic grid for n sites (the rule above).
GroupGrid group_grid_for(std::size_t n);
// The grid `spec` asks for, for a view of n sites.
GroupGrid group_grid_for(std::size_t n, const GridSpec& spec);

// The ranks (ascending, so every member derives the same ring order) averaged with `rank` at `step`.
std::vector<std::size_t> group_at(const GroupGrid& grid, std::size_t rank, std::uint64_t step);

}  // namespace meridian::gossip
