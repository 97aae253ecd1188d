// Roster input hygiene: an entry for the roster file is exactly NAME KEY [tcp://HOST:PORT], so no
// field can smuggle in a line of its own; a roster file with control characters or a malformed address
// is refused naming the line. Against a running site: `meridian roster add` with a newline in the
// address writes no second identity into the roster, whether the command line or the daemon is asked.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>

#include "daemon/control/control_client.h"
#include "daemon/control/roster_file.h"
#include "peer/curve_keys.h"
#include "tests/daemon/federation_process_support.h"
#include "tests/daemon/site_process.h"
#include "tests/support/file_contents.h"
#include "tests/support/meridian_command.h"
#include "tests/support/temp_dir.h"

namespace fs = std::filesystem;
using Catch::Matchers::Contains;
using meridian::daemon::roster_entry_problem;
using meridian::tests::eventually_from_process;
using meridian::tests::TempDir;

namespace {

const std::string kKey = meridian::peer::generate_curve_key_pair().public_key;

std::string problem_of(const std::string& name, const std::string& key, const std::string& address) {
  return roster_entry_problem({name, key, address}).value_or("");
}

}  // namespace

TEST_CASE("a roster entry is exactly a name, a key and tcp://HOST:PORT", "[daemon][roster][security][unit]") {
  CHECK_FALSE(roster_entry_problem({"epsilon", kKey, ""}));
  CHECK_FALSE(roster_entry_problem({"epsilon", kKey, "tcp://10.0.0.5:7400"}));
  CHECK_FALSE(roster_entry_problem({"epsilon", kKey, "tcp://site-5.example.org:7400"}));
  CHECK_FALSE(roster_entry_problem({"epsilon", kKey, "tcp://[fd00::5]:7400"}));

  const std::string second = "mallory " + meridian::peer::generate_curve_key_pair().public_key;
  CHECK_THAT(problem_of("epsilon", kKey, "tcp://10.0.0.5:7400\n" + second),
             Contains("tcp://10.0.0.5:7400\\x0amallory") && Contains("must look like tcp://host:port"));
  CHECK_THAT(problem_of("epsilon", kKey, "tcp://10.0.0.5:7400 extra"), Contains("must look like tcp://host:port"));
  CHECK_THAT(problem_of("epsilon", kKey, "tcp://10.0.0.5:7400\r"), Contains("\\x0d"));
  CHECK_THAT(problem_of("epsilon", kKey, "tcp://\x1b[31mhost:7400"), Contains("\\x1b"));
  CHECK_THAT(problem_of("epsilon", kKey, "tcp://10.0.0.5"), Contains("must end with :PORT"));
  CHECK_THAT(problem_of("epsilon", kKey, "tcp://10.0.0.5:0"), Contains("1 to 65535"));
  CHECK_THAT(problem_of("epsilon", kKey, "tcp://10.0.0.5:99999"), Contains("1 to 65535"));
  CHECK_THAT(problem_of("epsilon", kKey, "ipc:///tmp/x"), Contains("must start with tcp://"));
  CHECK_THAT(problem_of("epsilon", kKey, "tcp://:7400"), Contains("the host is empty"));
  CHECK_THAT(problem_of("eps\nilon", kKey, ""), Contains("site name 'eps\\x0ailon'"));
  CHECK_THAT(problem_of("epsilon", kKey + "\n" + second, ""), Contains("is not a 40-character Z85"));
}

TEST_CASE("a roster file with a control character or a malformed address is refused, naming the line",
          "[daemon][roster][security][unit]") {
  TempDir tmp;
  const auto file = tmp.path() / "roster.txt";
  std::ofstream(file) << "# federation\r\nalpha " << kKey << " tcp://10.0.0.1:7400\r\n";
  CHECK_NOTHROW(meridian::daemon::read_roster_text(file));  // CRLF line ends are fine
  std::ofstream(file, std::ios::app) << "beta\x1b[2J " << kKey << "\n";
  CHECK_THROWS_WITH(meridian::daemon::read_roster_text(file),
                    Contains("roster.txt line 3") && Contains("control character \\x1b"));
  std::ofstream(file) << "# federation\nalpha " << kKey << " tcp://10.0.0.1\n";
  CHECK_THROWS_WITH(meridian::daemon::read_roster_text(file),
                    Contains("roster.txt line 2") && Contains("must look like tcp://host:port"));
}

TEST_CASE("an address with a newline cannot write a second identity into a running site's roster",
          "[daemon][roster][security][process]") {
  TempDir dir;
  const auto table = meridian::tests::write_small_table(dir.path());
  const meridian::tests::SiteKeys keys(dir.path(), {"alpha", "epsilon", "mallory"});
  const auto roster = dir.path() / "roster.txt";
  std::ofstream(roster) << keys.roster({"alpha"});
  const std::string before = meridian::tests::file_contents(roster);
  meridian::tests::SiteProcess alpha(dir.path() / "alpha", meridian::tests::training_site_args("alpha", 0, 1, table)
                                                                 .set("--algo", "local")
                                                                 .secure(dir.path() / "keys-alpha", roster));
  const std::string socket = (alpha.run_dir() / "control.sock").string();
  INFO(alpha.log());
  REQUIRE(eventually_from_process([&] { return fs::exists(socket) || alpha.exited(); }));
  REQUIRE_FALSE(alpha.exited());

  const std::string smuggled =
      "tcp://10.0.0.5:7400\nmallory " + keys.of.at("mallory").public_key + " tcp://10.0.0.6:7400";
  // Through the command line, which refuses it before asking the daemon.
  const auto cli = meridian::tests::run_meridian("roster add epsilon '" + keys.of.at("epsilon").public_key + "' '" +
                                                 smuggled + "' --socket " + socket);
  INFO(cli.output);
  CHECK(cli.exit_code != 0);
  CHECK_THAT(cli.output, Contains("must look like tcp://host:port") && Contains("\\x0amallory"));
  // Straight to the daemon, as another client of the socket could: refused the same way.
  meridian::daemon::RosterChange change;
  change.action = meridian::daemon::RosterChange::Action::kAdd;
  change.name = "epsilon";
  change.public_key = keys.of.at("epsilon").public_key;
  change.address = smuggled;
  CHECK_THROWS_WITH(meridian::daemon::ControlClient(socket).roster(change), Contains("must look like tcp://host:port"));

  CHECK(meridian::tests::file_contents(roster) == before);
  const auto listed = meridian::tests::run_meridian("roster list --socket " + socket);
  CHECK(listed.exit_code == 0);
  CHECK_THAT(listed.output, Contains("alpha"));
  CHECK(listed.output.find("mallory") == std::string::npos);
  CHECK(listed.output.find("epsilon") == std::string::npos);
}
