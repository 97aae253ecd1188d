// The mixing algorithms a site can run (DESIGN.md §1), by name, for configuration files and flags.
// kLocal means no communication at all: no mixer, no channel; the compute-only reference.
#pragma once

#include <optional>
#include <string_view>

namespace meridian::gossip {

enum class Algorithm { kAllReduce, kDts, kSgp, kDsync, kLocal };

// "allreduce", "dts", "sgp", "dsync", "local".
constexpr std::string_view name_of(Algorithm a) {
  switch (a) {
    case Algorithm::kAllReduce: return "allreduce";
    case Algorithm::kDts: return "dts";
    case Algorithm::kSgp: return "sgp";
    case Algorithm::kDsync: return "dsync";
    case Algorithm::kLocal: return "local";
  }
  return "?";
}

// The algorithm called `name`, or nullopt for an unknown name (the caller names it in its error).
constexpr std::optional<Algorithm> parse_algorithm(std::string_view name) {
  for (auto a : {Algorithm::kAllReduce, Algorithm::kDts, Algorithm::kSgp, Algorithm::kDsync, Algorithm::kLocal})
    if (name_of(a) == name) return a;
  return std::nullopt;
}

}  // namespace meridian::gossip
