// dts: gossip::Dts (gossip/dts.h), which is also the optimizer (--optimizer sgd or momentum, heavy-ball):
// sites step on their own and every P = --period steps average the window's displacement, applied
// D = --delay steps late with exact compensation (--compensation). The window's average travels over
// the ring, or with --exchange direct (or any --compression) in one direct crossing
// (gossip/direct_mean_mixer.h). Checkpoint sections: the parameters and, with momentum, "momentum".
#pragma once

#include "daemon/algorithms/algorithm.h"

namespace meridian::daemon::algorithms {

// dts' shape when neither --delay nor --period is given (on the command line, in the config file, or
// for simulate as a shared flag or a knob). The fields' own defaults, D = 0 and P = 1, average every step
// and wait for it: allreduce's schedule, which hides no latency, while hiding it is why one picks dts.
// D = 2, P = 16 keeps P >= 8·D, the shape that stays stable with momentum (gossip/dts.h), and P <= 16,
// which docs/results.md's experiment 7 found within 0.5 point of allreduce; it hides a latency of up to
// about two steps' compute.
inline constexpr int kDtsDefaultDelay = 2;
inline constexpr int kDtsDefaultPeriod = 16;

const Algorithm& dts_algorithm();

}  // namespace meridian::daemon::algorithms
