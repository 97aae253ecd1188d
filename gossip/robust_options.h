// Optional Byzantine-robust aggregation (off by default). With it on, a site does not trust the
// vectors other sites contribute to its averages and push-sum receipts:
//  - group averages (AverageMixer: allreduce, dts, re-averaging; GroupMixer: dsync) gather every
//    member's vector instead of summing them along the ring (a ring only ever shows a site partial
//    sums, so no site could tell one contribution from another), then take the coordinate-wise
//    trimmed mean (drop up to `trim` of the largest and smallest values of each coordinate, those that
//    are outliers) when the group has at least 2·trim + 1 members; smaller groups fall back to norm
//    clipping;
//  - norm clipping: another site's vector x_j counts as own + clip(x_j − own), the difference cut to at
//    most clip_factor × this site's own update scale (gossip/update_scale.h); at a site's first mix of
//    a kind, before it has a scale, the bound is 0 (others count as its own vector);
//  - push-sum receipts (PushSumMixer, sgp) are clipped the same way on their de-biased models.
// Every site of a federation must use the same setting (the robust group average exchanges other
// messages than the ring). See docs/reliability.md for what it costs and what it buys.
#pragma once

#include <cstddef>

namespace meridian::gossip {

struct RobustOptions {
  bool enabled = false;
  // Another site's difference from this site's own vector may be at most clip_factor times this
  // site's own update scale. <= 0 turns clipping off (trimmed mean only).
  double clip_factor = 4.0;
  // Values dropped at most at each end of every coordinate by the trimmed mean; 0 turns it off
  // (clipping only).
  std::size_t trim = 1;
  // An end value is dropped only when it lies more than this many median absolute deviations from the
  // coordinate's median (gossip/robust_combine.h); 0 always drops `trim` at each end.
  double outlier_mads = 4.5;
};

}  // namespace meridian::gossip
