#include "daemon/algorithms/registry.h"

#include <array>
#include <stdexcept>

#include "daemon/algorithms/allreduce.h"
#include "daemon/algorithms/diloco.h"
#include "daemon/algorithms/dsync.h"
#include "daemon/algorithms/dts.h"
#include "daemon/algorithms/local.h"
#include "daemon/algorithms/sgp.h"

namespace meridian::daemon::algorithms {

std::span<const Algorithm* const> all_algorithms() {
  static const std::array<const Algorithm*, 6> algorithms{
      &allreduce_algorithm(), &dts_algorithm(),   &sgp_algorithm(),
      &dsync_algorithm(),     &local_algorithm(), &diloco_algorithm(),
  };
  return algorithms;
}

const Algorithm& algorithm_for(gossip::Algorithm id) {
  for (const Algorithm* a : all_algorithms())
    if (a->id() == id) return *a;
  throw std::logic_error("no algorithm registered for '" + std::string(gossip::name_of(id)) + "'");
}

const Algorithm* find_algorithm(std::string_view name) {
  const auto id = gossip::parse_algorithm(name);
  if (!id) return nullptr;
  for (const Algorithm* a : all_algorithms())
    if (a->id() == *id) return a;
  return nullptr;
}

std::string algorithm_names(std::string_view separator) {
  std::string out;
  for (const Algorithm* a : all_algorithms())
    out += (out.empty() ? "" : std::string(separator)) + std::string(a->name());
  return out;
}

}  // namespace meridian::daemon::algorithms
