// The options an algorithm declares for itself (daemon/algorithms/algorithm_option.h): the
// configuration makes their flags, config-file keys, help, `meridian init` lines and checks from the
// declarations alone. A toy algorithm registered by the test shows it for an algorithm that nothing
// outside its own code knows; diloco's options show it for a built-in one.
#include <catch2/catch.hpp>

#include <CLI/CLI.hpp>

#include <algorithm>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "daemon/algorithms/registry.h"
#include "daemon/site_config.h"
#include "tests/daemon/toy_algorithm.h"
#include "tests/support/temp_dir.h"

using namespace meridian::daemon;
using Catch::Matchers::Contains;
using meridian::tests::kToyStrength;
using meridian::tests::TempDir;
using meridian::tests::ToyAlgorithm;

namespace {

// Parses `args` the way `meridian start` does (tests/daemon/site_config_test.cc).
SiteConfig parse(std::vector<std::string> args) {
  CLI::App app{"test"};
  SiteConfig config;
  bind_site_options(app, config);
  std::reverse(args.begin(), args.end());  // CLI11 takes a vector in reverse order
  app.parse(args);
  apply_site_config_file(app, config);
  apply_algorithm_defaults(app, config);
  return config;
}

std::string help_of_start() {
  CLI::App app{"test"};
  SiteConfig config;
  bind_site_options(app, config);
  return app.help();
}

std::string problems_of(const SiteConfig& config) {
  std::string all;
  for (const auto& p : site_config_problems(config)) all += p + "\n";
  return all;
}

}  // namespace

TEST_CASE("a toy algorithm registered by a test gets its option as flag, key, help and checks",
          "[unit][daemon][config]") {
  const ToyAlgorithm toy;
  CHECK(algorithms::find_algorithm("toy") == nullptr);
  CHECK_THAT(help_of_start(), !Contains("--toy-strength"));
  {
    const algorithms::AlgorithmRegistration registration(toy);
    CHECK(algorithms::find_algorithm("toy") == &toy);
    CHECK(algorithms::algorithm_names() == "allreduce, dts, sgp, dsync, local, diloco, diloco-gossip, toy");
    CHECK(algorithms::find_algorithm_option("toy-strength") == &kToyStrength);

    // The flag, with its help and default, among the algorithm options; its value and start-up line.
    CHECK_THAT(help_of_start(), Contains("--toy-strength FLOAT=0.5") && Contains("toy: how hard the toy pulls"));
    auto config = parse({"--name", "a", "--algo", "toy", "--toy-strength", "0.25"});
    CHECK(config.algorithm_options.real(kToyStrength) == 0.25);
    CHECK(describe_algorithm(settings_of(config)) == "toy, strength 0.25");
    CHECK(describe_algorithm(settings_of(parse({"--name", "a", "--algo", "toy"}))) == "toy, strength 0.5");

    // The config-file key: read, written by `meridian init` with its help, and read back the same.
    TempDir tmp;
    const auto file = tmp.path() / "site.toml";
    std::ofstream(file) << "name = \"a\"\nalgo = \"toy\"\ntoy-strength = 0.75\n";
    config = parse({"--config", file.string()});
    CHECK(config.algorithm_options.real(kToyStrength) == 0.75);
    const auto rendered = render_site_config(config);
    CHECK_THAT(rendered, Contains("# toy: how hard the toy pulls, in (0, 1]\ntoy-strength = 0.75\n"));
    std::ofstream(file) << rendered;
    CHECK(read_site_config_file(file.string()) == config);
    std::ofstream(file) << "toy-strength = \"hard\"\n";
    CHECK_THROWS_WITH(parse({"--config", file.string()}), Contains(file.string()) && Contains("key 'toy-strength'"));
    CHECK_THROWS_AS(parse({"--toy-strength", "hard"}), CLI::ConversionError);

    // Its range, for a site running it; a value other than the default is refused for any other.
    CHECK_THAT(problems_of(parse({"--name", "a", "--algo", "toy", "--toy-strength", "2"})),
               Contains("--toy-strength: must be in (0, 1] (e.g. 0.5)"));
    CHECK_THAT(problems_of(parse({"--name", "a", "--algo", "sgp", "--toy-strength", "0.25"})),
               Contains("--toy-strength: applies to toy only (this site runs sgp)"));
    CHECK(problems_of(parse({"--name", "a", "--algo", "sgp", "--toy-strength", "0.5"})).empty());
  }
  CHECK(algorithms::find_algorithm("toy") == nullptr);
  CHECK(algorithms::find_algorithm_option("toy-strength") == nullptr);
  CHECK_THROWS_AS(parse({"--toy-strength", "0.25"}), CLI::ExtrasError);
}

TEST_CASE("a second algorithm or option of a taken name is refused at registration", "[unit][daemon][config]") {
  const ToyAlgorithm toy, twin;
  const algorithms::AlgorithmRegistration registration(toy);
  CHECK_THROWS_AS(algorithms::AlgorithmRegistration(twin), meridian::error::InternalError);
}

TEST_CASE("the declared options have unique names, help texts, and defaults their ranges accept",
          "[unit][daemon][config]") {
  CLI::App app{"test"};
  SiteConfig config;
  bind_site_options(app, config);  // CLI11 refuses a flag added twice
  std::set<std::string_view> names;
  for (const auto* option : algorithms::all_algorithm_options()) {
    INFO(option->name);
    CHECK(names.insert(option->name).second);
    CHECK(app.get_option_no_throw("--" + std::string(option->name)) != nullptr);
    CHECK_FALSE(option->help.empty());
    CHECK_FALSE(option->brief.empty());
    if (option->range != nullptr) CHECK(option->range(option->default_value).empty());
    // An algorithm declares it: one, or a family that shares the knob (diloco and diloco-gossip share
    // --outer-lr and --outer-momentum); all_algorithm_options() lists it once all the same (above).
    int declaring = 0;
    for (const auto* algorithm : algorithms::all_algorithms()) declaring += algorithm->declares(*option) ? 1 : 0;
    CHECK(declaring >= 1);
    const bool shared = option->name == "inner-steps" || option->name == "overlap" || option->name == "outer-lr" ||
                        option->name == "outer-momentum";
    CHECK(declaring <= (shared ? 2 : 1));
  }
  CHECK_FALSE(names.empty());
}

TEST_CASE("diloco's own options are flags and config keys, in their place among the algorithm options",
          "[unit][daemon][config][diloco]") {
  const auto config =
      parse({"--name", "a", "--algo", "diloco", "--fragments", "4", "--outer-lr", "1", "--outer-momentum", "0"});
  CHECK(describe_algorithm(settings_of(config)) ==
        "diloco, H = 32 inner steps (momentum), overlap τ = auto, F = 4 fragments, outer lr 1, outer momentum 0 "
        "(Nesterov), wire fp32, exchange auto (direct up to 8 sites, ring above)");
  const auto help = help_of_start();
  CHECK_THAT(help, Contains("--fragments INT=1") && Contains("--outer-lr FLOAT=0.7") &&
                       Contains("--outer-momentum FLOAT=0.9"));
  // Between --exchange and --robust-aggregation, as they were listed before diloco declared them.
  CHECK(help.find("--exchange") < help.find("--fragments"));
  CHECK(help.find("--outer-momentum") < help.find("--robust-aggregation"));
  const auto rendered = render_site_config(config);
  CHECK_THAT(rendered,
             Contains("\nfragments = 4\n") && Contains("\nouter-lr = 1.0\n") && Contains("\nouter-momentum = 0.0\n"));
  CHECK(rendered.find("\nexchange = ") < rendered.find("\nfragments = "));
  // Setting the default is the same as leaving it.
  SiteConfig a, b;
  a.algorithm_options.set(*algorithms::find_algorithm_option("outer-lr"), 0.7);
  CHECK(a == b);
  a.algorithm_options.set(*algorithms::find_algorithm_option("outer-lr"), 1);  // a whole number for a real option
  CHECK(a.algorithm_options.real(*algorithms::find_algorithm_option("outer-lr")) == 1.0);
  CHECK_THROWS_AS(a.algorithm_options.set(*algorithms::find_algorithm_option("fragments"), 1.5),
                  meridian::error::InternalError);
}
