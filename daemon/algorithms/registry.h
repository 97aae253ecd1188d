// Every algorithm a site can run: the one list the daemon, the configuration and the CLI consult, and
// with them every option an algorithm declares for itself (daemon/algorithms/algorithm_option.h).
// Adding an algorithm adds one line to registry.cc; see docs/design.md,
// "What an algorithm implements".
//
// Thread-safety: read-only after static initialization, except while an AlgorithmRegistration adds one
// (tests, before any other thread reads the list).
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "daemon/algorithms/algorithm.h"
#include "daemon/algorithms/algorithm_option.h"

namespace meridian::daemon::algorithms {

// In the order the help texts name them.
std::span<const Algorithm* const> all_algorithms();

// The algorithm called `name` on the command line (its --algo), or nullptr.
const Algorithm* find_algorithm(std::string_view name);

// The algorithm called `name`, for a name the configuration accepted (SiteSettings::algorithm()); throws
// error::InternalError for a name no algorithm has.
const Algorithm& algorithm_for(std::string_view name);

// "allreduce, dts, sgp, dsync, local, diloco, diloco-gossip" (`separator` between names) for help texts and messages.
std::string algorithm_names(std::string_view separator = ", ");

// Every option the algorithms declare, in the algorithms' order and then each one's: the order of their
// flags in the help and of their keys in `meridian init`'s file. An option several algorithms declare
// (diloco's --outer-lr, which diloco-gossip reads too) comes once, in the first one's place.
std::vector<const AlgorithmOption*> all_algorithm_options();

// The declared option called `name` (without "--"), or nullptr.
const AlgorithmOption* find_algorithm_option(std::string_view name);

// Adds `algorithm` after the built-in ones for as long as it lives, as if registry.cc listed it: what a
// test uses to show that an algorithm, its options included, needs nothing but its own code. Throws
// error::InternalError when its name or one of its option names is taken. `algorithm` must outlive it.
class AlgorithmRegistration {
 public:
  explicit AlgorithmRegistration(const Algorithm& algorithm);
  ~AlgorithmRegistration();
  AlgorithmRegistration(const AlgorithmRegistration&) = delete;
  AlgorithmRegistration& operator=(const AlgorithmRegistration&) = delete;

 private:
  const Algorithm& algorithm_;
};

}  // namespace meridian::daemon::algorithms
