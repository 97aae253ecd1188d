// --trainer: builtin or attached, and an attached site only with an algorithm that runs attached
// (daemon/attached_trainer.h), refused at the configuration check naming the ones that do.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "daemon/site_config.h"

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

TEST_CASE("--trainer names builtin or attached, and attached runs allreduce, local and diloco",
          "[daemon][config][attached][unit]") {
  CHECK(problems_of("builtin", "sgp").empty());
  for (const char* algo : {"allreduce", "local", "diloco"}) CHECK(problems_of("attached", algo).empty());
  CHECK(problems_of("remote", "sgp") == std::vector<std::string>{"--trainer: 'remote' is not builtin or attached"});
  for (const char* algo : {"sgp", "dsync", "dts", "diloco-gossip"})
    CHECK(problems_of("attached", algo) ==
          std::vector<std::string>{"--trainer: --algo " + std::string(algo) +
                                   " does not run with --trainer attached yet; attached sites run allreduce, local, "
                                   "diloco"});
}
