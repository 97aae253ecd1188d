// `meridian init --out FILE` ends with the next step that is really left: keys only when they do not
// exist yet, the roster only when it is missing or lacks this site, then the start.
#include <catch2/catch.hpp>

#include <fstream>
#include <string>

#include "tests/support/meridian_command.h"
#include "tests/support/temp_dir.h"

using Catch::Matchers::Contains;

TEST_CASE("init names the next step that is left: keys, roster, then start", "[cli][config][process]") {
  meridian::tests::TempDir tmp;
  const auto file = (tmp.path() / "site.toml").string();
  const std::string init = "init --name alpha --listen tcp://127.0.0.1:7400 --force --out " + file;

  const auto fresh = meridian::tests::run_meridian(init);
  INFO(fresh.output);
  REQUIRE(fresh.exit_code == 0);
  CHECK_THAT(fresh.output, Contains("next: create keys with 'meridian keygen --out "));
  CHECK_THAT(fresh.output, Contains("roster.txt (one 'NAME PUBLIC_KEY ADDRESS' line each; 'quorum = N' lets "
                                    "training start with N of them), then run 'meridian start --config " + file));

  const auto keygen = meridian::tests::run_meridian("keygen --out " + (tmp.path() / "keys").string());
  INFO(keygen.output);
  REQUIRE(keygen.exit_code == 0);
  std::ofstream(tmp.path() / "roster.txt") << "beta rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7\n";
  const auto keys_made = meridian::tests::run_meridian(init);
  INFO(keys_made.output);
  CHECK_THAT(keys_made.output, !Contains("create keys"));
  CHECK_THAT(keys_made.output, Contains("next: add 'alpha' with its public key to "));

  const std::string key = keygen.output.substr(0, keygen.output.find('\n'));  // keygen prints the public key
  std::ofstream(tmp.path() / "roster.txt", std::ios::app) << "alpha " << key << "\n";
  const auto ready = meridian::tests::run_meridian(init);
  INFO(ready.output);
  CHECK_THAT(ready.output, Contains("next: run 'meridian start --config " + file + "'"));

  const auto insecure = meridian::tests::run_meridian(init + " --insecure");
  CHECK_THAT(insecure.output, Contains("next: run 'meridian start --config "));
}
