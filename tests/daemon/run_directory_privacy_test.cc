// The run directory is private: created 0700, refused when another user owns it or its group or others
// can write it, and no file the daemon writes there follows a link planted in its place (the lock
// file, the endpoint and its temporary, progress and result, checkpoints, the roster's temporary).
// The control socket is 0600 in a private directory.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <vector>

#include "daemon/checkpoint/checkpoint_store.h"
#include "daemon/control/control_server.h"
#include "daemon/files/directory_lock.h"
#include "daemon/files/private_directory.h"
#include "daemon/control/roster_file.h"
#include "daemon/status/run_trail.h"
#include "tests/support/temp_dir.h"
#include "tests/support/file_contents.h"

namespace fs = std::filesystem;
using Catch::Matchers::Contains;
using meridian::daemon::DirectoryLock;
using meridian::daemon::RunTrail;
using meridian::tests::TempDir;

namespace {

mode_t mode_of(const fs::path& p) {
  struct stat st {};
  REQUIRE(::lstat(p.c_str(), &st) == 0);
  return st.st_mode & 07777;
}

// A file outside the run directory that a planted link points at; its content must survive.
struct Bait {
  fs::path file;
  explicit Bait(const fs::path& dir) : file(dir / "precious.txt") { std::ofstream(file) << "precious\n"; }
  bool untouched() const { return meridian::tests::file_contents(file) == "precious\n"; }
};

class NoDaemon : public meridian::daemon::ControlHandler {
 public:
  meridian::daemon::StatusReport status() override { return {}; }
  std::vector<meridian::daemon::PeerReport> peers() override { return {}; }
  meridian::daemon::LeaveReport leave() override { return {}; }
};

}  // namespace

TEST_CASE("a run directory the daemon creates has mode 0700", "[daemon][security][unit]") {
  TempDir tmp;
  const auto run = tmp.path() / "runs" / "a";
  const auto lock = DirectoryLock::acquire(run);
  CHECK(mode_of(run) == 0700);
  CHECK(mode_of(run / ".meridian.lock") == 0600);
}

TEST_CASE("a run directory that group or others can write is refused, naming it, its mode and the fix",
          "[daemon][security][unit]") {
  TempDir tmp;
  const auto run = tmp.path() / "open";
  fs::create_directory(run);
  fs::permissions(run, fs::perms::all);
  REQUIRE(mode_of(run) == 0777);
  CHECK_THROWS_WITH(DirectoryLock::acquire(run),
                    Contains(run.string()) && Contains("mode 0777") && Contains("chmod 700 " + run.string()));
  CHECK_FALSE(fs::exists(run / ".meridian.lock"));
  fs::permissions(run, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec);
  CHECK_NOTHROW(DirectoryLock::acquire(run));  // 0750: others may read, nobody else may write
}

TEST_CASE("a run directory another user owns is refused", "[daemon][security][unit]") {
  TempDir tmp;
  // As root, a directory handed to another user; otherwise the root directory, which root owns.
  fs::path run = "/";
  if (::geteuid() == 0) {
    run = tmp.path() / "theirs";
    fs::create_directory(run);
    fs::permissions(run, fs::perms::owner_all);
    REQUIRE(::chown(run.c_str(), 65534, 65534) == 0);
  }
  CHECK_THROWS_WITH(DirectoryLock::acquire(run), Contains(run.string()) && Contains("belongs to uid") &&
                                                     Contains("chown " + std::to_string(::geteuid())));
}

TEST_CASE("a link planted at the lock file is refused and its target left untouched", "[daemon][security][unit]") {
  TempDir tmp;
  const Bait bait(tmp.path());
  const auto run = tmp.path() / "run";
  fs::create_directory(run);
  fs::create_symlink(bait.file, run / ".meridian.lock");
  CHECK_THROWS_WITH(DirectoryLock::acquire(run), Contains(".meridian.lock") && Contains("symbolic link"));
  CHECK(bait.untouched());
  fs::remove(run / ".meridian.lock");
  fs::create_hard_link(bait.file, run / ".meridian.lock");
  CHECK_THROWS_WITH(DirectoryLock::acquire(run), Contains("not a plain file of this user's with one name"));
  CHECK(bait.untouched());
}

TEST_CASE("links planted at the run trail's files never redirect a write", "[daemon][security][unit]") {
  TempDir tmp;
  const Bait bait(tmp.path());
  const auto run = tmp.path() / "run";
  fs::create_directory(run);
  const RunTrail trail(run);
  // The fixed temporary name the endpoint was once written under, and the endpoint itself: the link is
  // replaced by the new file, never written through.
  fs::create_symlink(bait.file, run / "endpoint.tmp");
  fs::create_symlink(bait.file, run / "endpoint");
  fs::create_symlink(bait.file, run / "result.json");
  trail.write_endpoint("tcp://127.0.0.1:7400");
  trail.write_result({});
  CHECK(bait.untouched());
  CHECK_FALSE(fs::is_symlink(run / "endpoint"));
  CHECK(meridian::tests::file_contents(run / "endpoint") == "tcp://127.0.0.1:7400\n");
  CHECK_FALSE(fs::is_symlink(run / "result.json"));
  // An append cannot replace the file, so a link there is refused.
  fs::create_symlink(bait.file, run / "progress.jsonl");
  CHECK_THROWS_WITH(trail.append_progress({}), Contains("progress.jsonl") && Contains("symbolic link"));
  CHECK(bait.untouched());
}

TEST_CASE("a link planted at a checkpoint's name is replaced, not written through", "[daemon][security][unit]") {
  TempDir tmp;
  const Bait bait(tmp.path());
  const auto dir = tmp.path() / "checkpoints";
  fs::create_directory(dir);
  meridian::daemon::CheckpointStore store(dir, 2);
  const std::vector<float> parameters(8, 0.5f);
  meridian::daemon::CheckpointView view;
  view.parameters = parameters;
  view.step = 7;
  view.model_fingerprint = "test";
  view.algorithm = "local";
  fs::create_symlink(bait.file, store.path_for_step(7));
  const auto status = store.write(view);
  INFO(status.error);
  CHECK(status.ok);
  CHECK(bait.untouched());
  CHECK_FALSE(fs::is_symlink(store.path_for_step(7)));
}

TEST_CASE("a link planted at the roster's old temporary name is not written through", "[daemon][security][unit]") {
  TempDir tmp;
  const Bait bait(tmp.path());
  const auto roster = tmp.path() / "roster.txt";
  std::ofstream(roster) << "# roster\n";
  fs::create_symlink(bait.file, tmp.path() / "roster.txt.tmp");
  meridian::daemon::write_roster_text(roster, "# roster, edited\n");
  CHECK(bait.untouched());
  CHECK(meridian::tests::file_contents(roster) == "# roster, edited\n");
}

TEST_CASE("the control socket is 0600 in a private directory; a directory others can write is refused",
          "[daemon][security][unit]") {
  TempDir tmp;
  NoDaemon handler;
  {
    const auto dir = tmp.path() / "ctl";
    meridian::daemon::ControlServer server((dir / "control.sock").string(), handler);
    CHECK(mode_of(dir) == 0700);
    CHECK((mode_of(dir / "control.sock") & 0777) == 0600);
    // Nothing of the staging left behind.
    std::size_t entries = 0;
    for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++entries;
    CHECK(entries == 1);
  }
  const auto open = tmp.path() / "open";
  fs::create_directory(open);
  fs::permissions(open, fs::perms::all);
  CHECK_THROWS_WITH(meridian::daemon::ControlServer((open / "control.sock").string(), handler),
                    Contains(open.string()) && Contains("mode 0777"));
  CHECK_FALSE(fs::exists(open / "control.sock"));
}
