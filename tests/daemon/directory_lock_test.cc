#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <optional>

#include "daemon/files/directory_lock.h"
#include "tests/support/temp_dir.h"

using Catch::Matchers::Contains;
using meridian::daemon::DirectoryLock;
using meridian::daemon::DirectoryLockError;
using meridian::tests::TempDir;

TEST_CASE("a directory is locked by one owner at a time", "[daemon][lock][unit]") {
  TempDir tmp;
  const auto dir = tmp.path() / "run";
  std::optional<DirectoryLock> first = DirectoryLock::acquire(dir);
  CHECK(std::filesystem::is_directory(dir));

  CHECK_THROWS_WITH(DirectoryLock::acquire(dir), (Contains(dir.string()) && Contains("in use by another daemon") &&
                                                  Contains("(pid " + std::to_string(::getpid()) + ")")));

  // Moving keeps the lock; destroying releases it.
  auto moved = std::move(*first);
  first.reset();
  CHECK_THROWS_AS(DirectoryLock::acquire(dir), DirectoryLockError);
  { auto gone = std::move(moved); }
  CHECK_NOTHROW(DirectoryLock::acquire(dir));
}

TEST_CASE("a daemon killed with SIGKILL leaves no stale lock", "[daemon][lock][process]") {
  TempDir tmp;
  int ready[2];
  REQUIRE(::pipe(ready) == 0);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    std::optional<DirectoryLock> lock;
    try {
      lock = DirectoryLock::acquire(tmp.path());
    } catch (const DirectoryLockError&) {
    }
    const char ok = lock ? '1' : '0';
    (void)!::write(ready[1], &ok, 1);
    ::pause();
    ::_exit(0);
  }
  char ok = 0;
  REQUIRE(::read(ready[0], &ok, 1) == 1);
  REQUIRE(ok == '1');
  CHECK_THROWS_WITH(DirectoryLock::acquire(tmp.path()), (Contains("(pid " + std::to_string(child) + ")")));

  ::kill(child, SIGKILL);
  int status = 0;
  ::waitpid(child, &status, 0);
  ::close(ready[0]);
  ::close(ready[1]);
  CHECK_NOTHROW(DirectoryLock::acquire(tmp.path()));
}

TEST_CASE("a directory that cannot be created gives a clear error", "[daemon][lock][unit]") {
  TempDir tmp;
  std::ofstream(tmp.path() / "file") << "x";
  CHECK_THROWS_WITH(DirectoryLock::acquire(tmp.path() / "file" / "run"),
                    (Contains("file/run") && Contains("Not a directory")));
}
