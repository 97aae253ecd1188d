#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "peer/curve_keys.h"
#include "peer/roster.h"
#include "tests/support/build_paths.h"
#include "tests/support/temp_dir.h"

using namespace meridian::peer;
namespace fs = std::filesystem;

TEST_CASE("key pairs are written with private secret files and read back", "[peer][identity][unit]") {
  const meridian::tests::TempDir tmp;
  const auto& dir = tmp.path();
  const auto keys = generate_curve_key_pair();
  CHECK(is_z85_key(keys.public_key));
  CHECK(is_z85_key(keys.secret_key));
  write_key_pair(keys, dir / "site");
  struct stat st {};
  REQUIRE(::stat((dir / "site" / "secret.key").c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  REQUIRE(::stat((dir / "site" / "public.key").c_str(), &st) == 0);
  CHECK((st.st_mode & 0044) == 0044);
  const auto back = read_key_pair(dir / "site");
  CHECK(back.public_key == keys.public_key);
  CHECK(back.secret_key == keys.secret_key);
  CHECK_THROWS_WITH(write_key_pair(keys, dir / "site"), Catch::Contains("refusing to overwrite"));
  ::chmod((dir / "site" / "secret.key").c_str(), 0644);
  CHECK_THROWS_WITH(read_key_pair(dir / "site"), Catch::Contains("chmod 600"));
  CHECK_THROWS_WITH(read_key_pair(dir / "missing"), Catch::Contains("meridian keygen"));
  fs::remove_all(dir);
}

TEST_CASE("keygen command writes a key pair and prints the public key", "[peer][identity][cli][process]") {
  const meridian::tests::TempDir tmp;
  const auto& dir = tmp.path();
  const std::string cmd = std::string(meridian::tests::meridian_binary()) + " keygen --out " + (dir / "k").string() +
                          " > " + (dir / "out.txt").string();
  REQUIRE(std::system(cmd.c_str()) == 0);
  std::ifstream printed(dir / "out.txt");
  std::string key;
  printed >> key;
  CHECK(key == read_key_pair(dir / "k").public_key);
  fs::remove_all(dir);
}

TEST_CASE("roster parses names, keys and optional addresses and names bad lines", "[peer][identity][unit]") {
  const auto k1 = generate_curve_key_pair().public_key, k2 = generate_curve_key_pair().public_key;
  const auto roster = Roster::parse("# sites\n\n  oregon " + k1 + " tcp://10.0.0.1:7000\ntokyo " + k2 + "\n");
  REQUIRE(roster.entries().size() == 2);
  CHECK(roster.by_name("oregon")->address == "tcp://10.0.0.1:7000");
  CHECK(roster.by_key(k2)->name == "tokyo");
  CHECK(roster.by_address("tcp://10.0.0.1:7000")->name == "oregon");
  CHECK(roster.by_name("ohio") == nullptr);
  CHECK(Roster::parse(roster.to_text()).entries().size() == 2);

  CHECK_THROWS_WITH(Roster::parse("a " + k1 + "\nb " + k1 + "\n", "r.txt"),
                    Catch::Contains("r.txt line 2") && Catch::Contains("share one public key"));
  CHECK_THROWS_WITH(Roster::parse("a notakey\n"), Catch::Contains("line 1") && Catch::Contains("Z85"));
  CHECK_THROWS_WITH(Roster::parse("a\n"), Catch::Contains("NAME PUBLIC_KEY"));
  CHECK_THROWS_WITH(Roster::parse("a " + k1 + " http://x\n"), Catch::Contains("tcp://"));
  CHECK_THROWS_WITH(Roster::parse("bad/name " + k1 + "\n"), Catch::Contains("site name"));
  CHECK_THROWS_WITH(Roster::parse("a " + k1 + "\na " + k2 + "\n"), Catch::Contains("twice"));
}
