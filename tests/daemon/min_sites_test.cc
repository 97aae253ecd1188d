// How many sites a site waits for before training: the roster's size or the quorum it states unless
// --min-sites is given; the quorum line's syntax and its bounds; what the start-up line says.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "daemon/federation/min_sites.h"
#include "daemon/control/roster_file.h"
#include "error/error.h"
#include "peer/curve_keys.h"
#include "peer/roster.h"
#include "tests/support/temp_dir.h"

using namespace meridian::daemon;
using meridian::peer::Roster;
using Catch::Matchers::Contains;

namespace {

const std::string kA = meridian::peer::generate_curve_key_pair().public_key;
const std::string kB = meridian::peer::generate_curve_key_pair().public_key;
const std::string kC = meridian::peer::generate_curve_key_pair().public_key;

std::string three(const std::string& quorum_line = "") {
  return "# consortium\n" + quorum_line + "alpha " + kA + "\nbeta " + kB + " tcp://10.0.0.2:7400\ngamma " + kC + "\n";
}

}  // namespace

TEST_CASE("a roster states a quorum in one line, from 1 to the sites it lists", "[daemon][roster][unit]") {
  CHECK_FALSE(Roster::parse(three()).quorum());
  CHECK(Roster::parse(three("quorum = 2\n")).quorum() == 2u);
  CHECK(Roster::parse(three("  quorum=3\n")).quorum() == 3u);
  CHECK(Roster::parse(three() + "quorum =1\n").quorum() == 1u);  // anywhere in the file
  const auto with = Roster::parse(three("quorum = 2\n"));
  CHECK(Roster::parse(with.to_text()).quorum() == 2u);  // round-trips
  CHECK(with.entries().size() == 3);

  CHECK_THROWS_WITH(Roster::parse(three("quorum = 4\n"), "roster r.txt"),
                    Contains("roster r.txt line 2: quorum 4 is more than the 3 sites the roster lists"));
  CHECK_THROWS_WITH(Roster::parse(three("quorum = 0\n"), "r"), Contains("line 2: quorum must be a whole number"));
  CHECK_THROWS_WITH(Roster::parse(three("quorum = two\n"), "r"), Contains("got 'two'"));
  CHECK_THROWS_WITH(Roster::parse(three("quorum = -1\n")), Contains("at least 1"));
  CHECK_THROWS_WITH(Roster::parse(three("quorum = 2\nquorum = 3\n"), "r"),
                    Contains("line 3: a second quorum line (the first is line 2)"));
  // A site may be called "quorum": its line has a key, not '='.
  const auto named = Roster::parse("quorum " + kA + "\n");
  REQUIRE(named.entries().size() == 1);
  CHECK(named.entries()[0].name == "quorum");
  CHECK_FALSE(named.quorum());
}

TEST_CASE("the roster file's edits keep its quorum line", "[daemon][roster][unit]") {
  meridian::tests::TempDir tmp;
  const auto file = tmp.path() / "roster.txt";
  std::ofstream(file) << three("quorum = 2\n");
  const auto text = read_roster_text(file);  // the quorum line is not taken for a site's address
  const auto removed = roster_text_removing(text, "gamma", "roster");
  CHECK_THAT(removed, Contains("quorum = 2\n"));
  CHECK(Roster::parse(removed).quorum() == 2u);
  // Removing a site below the quorum leaves a roster the site refuses, naming both numbers.
  CHECK_THROWS_WITH(Roster::parse(roster_text_removing(removed, "beta", "roster"), "roster"),
                    Contains("quorum 2 is more than the 1 site the roster lists"));
}

TEST_CASE("min-sites defaults to the roster's size or quorum; fewer is an explicit choice", "[daemon][config][unit]") {
  SiteConfig config;
  const auto roster = Roster::parse(three());
  const auto quorum = Roster::parse(three("quorum = 2\n"));

  auto m = resolve_min_sites(config, &roster);
  CHECK(m.count == 3);
  CHECK(describe(m) == "min-sites 3: the roster's size (3 sites)");
  CHECK_FALSE(m.warning);

  m = resolve_min_sites(config, &quorum);
  CHECK(m.count == 2);
  CHECK(describe(m) == "min-sites 2: quorum 2 from the roster (it lists 3 sites)");

  config.min_sites = 1;
  m = resolve_min_sites(config, &roster);
  CHECK(describe(m) == "min-sites 1: --min-sites 1 given");
  REQUIRE(m.warning);
  CHECK(*m.warning == "--min-sites 1 is below the roster's size (it lists 3 sites): training may start with 1 site only");
  m = resolve_min_sites(config, &quorum);
  REQUIRE(m.warning);
  CHECK_THAT(*m.warning, Contains("below the roster's quorum 2"));
  config.min_sites = 4;
  m = resolve_min_sites(config, &roster);
  REQUIRE(m.warning);
  CHECK_THAT(*m.warning, Contains("--min-sites 4 is more than the 3 sites the roster lists"));
  config.min_sites = 3;
  CHECK_FALSE(resolve_min_sites(config, &quorum).warning);  // more than the quorum asks: no surprise

  // Without a roster (--insecure), --site-count as before.
  config.min_sites = 0;
  config.site_count = 1;
  m = resolve_min_sites(config, nullptr);
  CHECK(describe(m) == "min-sites 1: --site-count 1 (--insecure: no roster to count)");
  config.min_sites = 2;
  CHECK(describe(resolve_min_sites(config, nullptr)) == "min-sites 2: --min-sites 2 given");
}
