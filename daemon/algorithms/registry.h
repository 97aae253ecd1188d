// Every algorithm a site can run: the one list the daemon, the configuration and the CLI consult.
// Adding an algorithm adds one line to registry.cc (and its gossip::Algorithm name); see
// docs/algorithms.md, "Adding an algorithm".
//
// Thread-safety: read-only after static initialization.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "daemon/algorithms/algorithm.h"

namespace meridian::daemon::algorithms {

// In the order the help texts name them.
std::span<const Algorithm* const> all_algorithms();

// The algorithm registered for `id` (every gossip::Algorithm has one; throws std::logic_error otherwise).
const Algorithm& algorithm_for(gossip::Algorithm id);

// The algorithm called `name` on the command line, or nullptr.
const Algorithm* find_algorithm(std::string_view name);

// "allreduce, dts, sgp, dsync, local, diloco" (`separator` between names) for help texts and messages.
std::string algorithm_names(std::string_view separator = ", ");

}  // namespace meridian::daemon::algorithms
