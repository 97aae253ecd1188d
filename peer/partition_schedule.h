// Emulated network partitions (docs/wan-emulation.md): for a window of time after a site's transport
// starts, its links to the sites of the other side drop everything, membership traffic included, as
// a cut cable would. Every site is given the same schedule; each drops what it sends across the cut,
// so both directions are cut. Text form (--partition):
//   "s0,s1|s2,s3@20s+10s"          s0 and s1 cannot reach s2 and s3 from 20 s after start, for 10 s
//   "a|b,c@5s+2s;a,b|c@30s+1500ms"  several windows, separated by ';'
// A site in none of a window's groups is cut from nobody in it. Times take the units us, ms or s.
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

namespace meridian::peer {

struct PartitionWindow {
  std::vector<std::vector<std::string>> groups;  // sites that still reach each other; at least two groups
  std::chrono::microseconds start{0};            // after the transport started
  std::chrono::microseconds length{0};
  friend bool operator==(const PartitionWindow&, const PartitionWindow&) = default;
};

// Immutable after parsing; safe to share between threads for reading.
class PartitionSchedule {
 public:
  PartitionSchedule() = default;
  explicit PartitionSchedule(std::vector<PartitionWindow> windows) : windows_(std::move(windows)) {}

  bool empty() const { return windows_.empty(); }
  const std::vector<PartitionWindow>& windows() const { return windows_; }

  // Whether the link between `self` and `peer` is cut `since_start` after the transport started:
  // some window covers that time and puts the two in different groups.
  bool cuts(std::string_view self, std::string_view peer, std::chrono::microseconds since_start) const;

 private:
  std::vector<PartitionWindow> windows_;
};

// Parses the text form above ("" is no partition). Throws error::UserError quoting the text,
// naming the problem and showing a valid example.
PartitionSchedule parse_partition_schedule(std::string_view text);

}  // namespace meridian::peer
