#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>

#include "daemon/directory_lock.h"
#include "tests/daemon/temp_dir.h"

using Catch::Matchers::Contains;
using meridian::daemon::DirectoryLock;
using meridian::testing::TempDir;

TEST_CASE("a directory is locked by one owner at a time", "[daemon][lock][unit]") {
  TempDir tmp;
  const auto dir = tmp.path() / "run";
  std::string error;
  auto first = DirectoryLock::acquire(dir, error);
  REQUIRE(first);
  CHECK(std::filesystem::is_directory(dir));

  auto second = DirectoryLock::acquire(dir, error);
  CHECK_FALSE(second);
  CHECK_THAT(error, Contains(dir.string()) && Contains("in use by another daemon") &&
                        Contains("(pid " + std::to_string(::getpid()) + ")"));

  // Moving keeps the lock; destroying releases it.
  auto moved = std::move(*first);
  first.reset();
  CHECK_FALSE(DirectoryLock::acquire(dir, error));
  { auto gone = std::move(moved); }
  CHECK(DirectoryLock::acquire(dir, error));
}

TEST_CASE("a daemon killed with SIGKILL leaves no stale lock", "[daemon][lock][process]") {
  TempDir tmp;
  int ready[2];
  REQUIRE(::pipe(ready) == 0);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    std::string error;
    auto lock = DirectoryLock::acquire(tmp.path(), error);
    const char ok = lock ? '1' : '0';
    (void)!::write(ready[1], &ok, 1);
    ::pause();
    ::_exit(0);
  }
  char ok = 0;
  REQUIRE(::read(ready[0], &ok, 1) == 1);
  REQUIRE(ok == '1');
  std::string error;
  CHECK_FALSE(DirectoryLock::acquire(tmp.path(), error));
  CHECK_THAT(error, Contains("(pid " + std::to_string(child) + ")"));

  ::kill(child, SIGKILL);
  int status = 0;
  ::waitpid(child, &status, 0);
  ::close(ready[0]);
  ::close(ready[1]);
  CHECK(DirectoryLock::acquire(tmp.path(), error));
}

TEST_CASE("a directory that cannot be created gives a clear error", "[daemon][lock][unit]") {
  TempDir tmp;
  std::ofstream(tmp.path() / "file") << "x";
  std::string error;
  CHECK_FALSE(DirectoryLock::acquire(tmp.path() / "file" / "run", error));
  CHECK_THAT(error, Contains("file/run") && Contains("Not a directory"));
}
