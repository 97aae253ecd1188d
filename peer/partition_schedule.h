// Emulated network partitions (docs/wan-emulation.md): for a window of time after a site's transport
// starts, its links to the sites of the other side drop everything, membership traffic included, as
// a cut cable would. Every site is given the same schedule; each drops what it sends across the cut,
// so both directions are cut. Text form (--wan-partition):
//   "s0,s1|s2,s3@20s+10s"          s0 and s1 cannot reach s2 and s3 from 20 s after start, for 10 s
//   "a|b,c@5s+2s;a,b|c@30s+1500ms"  several windows, separated by ';'
//   "s3|*@20s+120s"                s3 cannot reach anyone for 2 minutes: '*' is every site not named
//                                  in the window's other groups (one '*' per window)
//   "s0|s1@30s+30s every 180s"     a flapping link: s0-s1 is down for 30 s of every 180 s, from 30 s
//                                  on (down 30-60 s, 210-240 s, ...); the period must exceed the length
// A site in none of a window's groups is cut from nobody in it. Times take the units us, ms or s.
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

namespace meridian::peer {

struct PartitionWindow {
  // Sites that still reach each other; at least two groups. A group {"*"} holds every site named in
  // no other group.
  std::vector<std::vector<std::string>> groups;
  std::chrono::microseconds start{0};  // after the transport started
  std::chrono::microseconds length{0};
  std::chrono::microseconds period{0};  // > length: the window repeats every period from start; 0: once
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
