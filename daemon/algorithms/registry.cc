#include "daemon/algorithms/registry.h"

#include <algorithm>

#include "daemon/algorithms/allreduce.h"
#include "daemon/algorithms/diloco.h"
#include "daemon/algorithms/diloco_gossip.h"
#include "daemon/algorithms/dsync.h"
#include "daemon/algorithms/dts.h"
#include "daemon/algorithms/local.h"
#include "daemon/algorithms/sgp.h"
#include "error/error.h"

namespace meridian::daemon::algorithms {
namespace {

std::vector<const Algorithm*>& registered() {
  static std::vector<const Algorithm*> algorithms{
      &allreduce_algorithm(), &dts_algorithm(),    &sgp_algorithm(),           &dsync_algorithm(),
      &local_algorithm(),     &diloco_algorithm(), &diloco_gossip_algorithm(),
  };
  return algorithms;
}

}  // namespace

std::span<const Algorithm* const> all_algorithms() { return registered(); }

const Algorithm* find_algorithm(std::string_view name) {
  for (const Algorithm* a : all_algorithms())
    if (a->name() == name) return a;
  return nullptr;
}

const Algorithm& algorithm_for(std::string_view name) {
  if (const Algorithm* a = find_algorithm(name)) return *a;
  throw error::InternalError("no algorithm registered as '" + std::string(name) + "'");
}

std::string algorithm_names(std::string_view separator) {
  std::string out;
  for (const Algorithm* a : all_algorithms())
    out += (out.empty() ? "" : std::string(separator)) + std::string(a->name());
  return out;
}

std::vector<const AlgorithmOption*> all_algorithm_options() {
  std::vector<const AlgorithmOption*> out;
  for (const Algorithm* a : all_algorithms())
    for (const AlgorithmOption* option : a->options())
      if (std::find(out.begin(), out.end(), option) == out.end()) out.push_back(option);  // shared by several
  return out;
}

const AlgorithmOption* find_algorithm_option(std::string_view name) {
  for (const AlgorithmOption* option : all_algorithm_options())
    if (option->name == name) return option;
  return nullptr;
}

AlgorithmRegistration::AlgorithmRegistration(const Algorithm& algorithm) : algorithm_(algorithm) {
  error::enforce(find_algorithm(algorithm.name()) == nullptr,
                 "algorithm '" + std::string(algorithm.name()) + "' is registered already");
  for (const AlgorithmOption* option : algorithm.options())
    error::enforce(find_algorithm_option(option->name) == nullptr,
                   "option --" + std::string(option->name) + " is declared already");
  registered().push_back(&algorithm);
}

AlgorithmRegistration::~AlgorithmRegistration() { std::erase(registered(), &algorithm_); }

}  // namespace meridian::daemon::algorithms
