// local: every site runs the configured optimizer on its own data and never communicates; the
// compute-only reference the others are measured against (docs/algorithms.md).
#pragma once

#include "daemon/algorithms/algorithm.h"

namespace meridian::daemon::algorithms {

const Algorithm& local_algorithm();

}  // namespace meridian::daemon::algorithms
