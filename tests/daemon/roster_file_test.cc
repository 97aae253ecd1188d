// Edits of a roster file by `meridian roster add|remove`: the rest of the file stays as written, a
// conflicting entry is refused naming both sides, and the file is replaced atomically with its mode.
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "daemon/control/roster_file.h"
#include "error/error.h"
#include "peer/curve_keys.h"
#include "tests/support/file_contents.h"
#include "tests/support/temp_dir.h"

using namespace meridian::daemon;
using Catch::Matchers::Contains;

namespace {

const std::string kAlphaKey = meridian::peer::generate_curve_key_pair().public_key;
const std::string kBetaKey = meridian::peer::generate_curve_key_pair().public_key;
const std::string kGammaKey = meridian::peer::generate_curve_key_pair().public_key;

std::string roster_text() {
  return "# the consortium\nalpha " + kAlphaKey + " tcp://10.0.0.1:7400\n\n# beta joined in May\nbeta " + kBetaKey +
         "\n";
}

}  // namespace

TEST_CASE("adding a site appends its line and keeps the rest of the roster file", "[unit][daemon][roster]") {
  const auto text = roster_text_adding(roster_text(), {"gamma", kGammaKey, "tcp://10.0.0.3:7400"}, "roster r");
  CHECK(text == roster_text() + "gamma " + kGammaKey + " tcp://10.0.0.3:7400\n");
  const auto roster = meridian::peer::Roster::parse(text);
  REQUIRE(roster.by_name("gamma"));
  CHECK(roster.by_name("gamma")->address == "tcp://10.0.0.3:7400");
  // A file without a final newline gets one before the new line.
  CHECK(roster_text_adding("alpha " + kAlphaKey, {"gamma", kGammaKey, ""}, "r") ==
        "alpha " + kAlphaKey + "\ngamma " + kGammaKey + "\n");
}

TEST_CASE("an added site that clashes with the roster is refused, naming both entries", "[unit][daemon][roster]") {
  CHECK_THROWS_WITH(roster_text_adding(roster_text(), {"beta", kGammaKey, ""}, "roster r"),
                    Contains("site 'beta' is already in roster r (key " + kBetaKey + ")"));
  CHECK_THROWS_WITH(roster_text_adding(roster_text(), {"gamma", kBetaKey, ""}, "roster r"),
                    Contains("key " + kBetaKey + " is already in roster r, as site 'beta'"));
  CHECK_THROWS_WITH(roster_text_adding(roster_text(), {"gamma", "short", ""}, "roster r"),
                    Contains("not a 40-character Z85 CurveZMQ key"));
  CHECK_THROWS_WITH(roster_text_adding(roster_text(), {"gamma", kGammaKey, "10.0.0.3:7400"}, "roster r"),
                    Contains("must look like tcp://host:port"));
}

TEST_CASE("removing a site drops only its line", "[unit][daemon][roster]") {
  const auto text = roster_text_removing(roster_text(), "alpha", "roster r");
  CHECK(text == "# the consortium\n\n# beta joined in May\nbeta " + kBetaKey + "\n");
  CHECK_THROWS_WITH(roster_text_removing(roster_text(), "delta", "roster r"),
                    Contains("site 'delta' is not in roster r (it lists: alpha, beta)"));
}

TEST_CASE("a roster change is described by name", "[unit][daemon][roster]") {
  const auto before = meridian::peer::Roster::parse(roster_text());
  const auto after = meridian::peer::Roster::parse("alpha " + kGammaKey + "\ngamma " + kBetaKey + "\n");
  CHECK(describe_roster_change(before, after) == "added gamma; removed beta; new key for alpha");
  CHECK(describe_roster_change(before, before) == "no change");
}

TEST_CASE("the roster file is replaced whole and keeps its mode", "[unit][daemon][roster]") {
  meridian::tests::TempDir dir;
  const auto file = dir.path() / "roster.txt";
  std::ofstream(file) << roster_text();
  std::filesystem::permissions(file, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  write_roster_text(file, "alpha " + kAlphaKey + "\n");
  CHECK(read_roster_text(file) == "alpha " + kAlphaKey + "\n");
  CHECK(std::filesystem::status(file).permissions() ==
        (std::filesystem::perms::owner_read | std::filesystem::perms::owner_write));
  CHECK_FALSE(std::filesystem::exists(dir.path() / "roster.txt.tmp"));
  CHECK_THROWS_WITH(write_roster_text(dir.path() / "missing" / "roster.txt", "x"),
                    Contains("the roster in force is unchanged"));
  CHECK_THROWS_WITH(read_roster_text(dir.path() / "nothing.txt"), Contains("cannot read roster"));
}
