// --trainer: builtin or attached; every algorithm runs attached (daemon/attached/attached_trainer.h), and one
// without an attached side (the tests' toy algorithm) is refused at the configuration check, naming
// the ones that run.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "daemon/algorithms/registry.h"
#include "daemon/site_config.h"
#include "tests/daemon/toy_algorithm.h"

using meridian::daemon::SiteConfig;
using meridian::daemon::site_config_problems;

namespace {

std::vector<std::string> problems_of(const std::string& trainer, const std::string& algo) {
  SiteConfig config;
  config.name = "a";
  config.trainer = trainer;
  config.algo = algo;
  return site_config_problems(config);
}

}  // namespace

TEST_CASE("--trainer names builtin or attached, and every algorithm runs attached",
          "[daemon][config][attached][unit]") {
  CHECK(problems_of("builtin", "sgp").empty());
  for (const char* algo : {"allreduce", "dts", "sgp", "dsync", "local", "diloco", "diloco-gossip"})
    CHECK(problems_of("attached", algo).empty());
  CHECK(problems_of("remote", "sgp") == std::vector<std::string>{"--trainer: 'remote' is not builtin or attached"});
  // An algorithm without an attached side is refused, naming those that have one.
  const meridian::tests::ToyAlgorithm toy;
  const meridian::daemon::algorithms::AlgorithmRegistration registration(toy);
  CHECK(problems_of("attached", "toy") ==
        std::vector<std::string>{"--trainer: --algo toy does not run with --trainer attached; attached sites run "
                                 "allreduce, dts, sgp, dsync, local, diloco, diloco-gossip"});
}
