// The training algorithms a site can run (docs/algorithms.md), by name, for configuration files and
// flags. kLocal means no communication at all: no mixer, no channel; the compute-only reference.
// What each one is lives in daemon/algorithms/; an algorithm added there gets its name here, one line
// in each of the two lists below.
#pragma once

#include <array>
#include <optional>
#include <string_view>
#include <utility>

namespace meridian::gossip {

enum class Algorithm { kAllReduce, kDts, kSgp, kDsync, kLocal, kDiloco, kDilocoGossip };

inline constexpr auto kAlgorithmNames = std::to_array<std::pair<Algorithm, std::string_view>>({
    {Algorithm::kAllReduce, "allreduce"},
    {Algorithm::kDts, "dts"},
    {Algorithm::kSgp, "sgp"},
    {Algorithm::kDsync, "dsync"},
    {Algorithm::kLocal, "local"},
    {Algorithm::kDiloco, "diloco"},
    {Algorithm::kDilocoGossip, "diloco-gossip"},
});

// "allreduce", "dts", "sgp", "dsync", "local", "diloco", "diloco-gossip".
constexpr std::string_view name_of(Algorithm a) {
  for (const auto& [id, name] : kAlgorithmNames)
    if (id == a) return name;
  return "?";
}

// The algorithm called `name`, or nullopt for an unknown name (the caller names it in its error).
constexpr std::optional<Algorithm> parse_algorithm(std::string_view name) {
  for (const auto& [id, known] : kAlgorithmNames)
    if (known == name) return id;
  return std::nullopt;
}

}  // namespace meridian::gossip
