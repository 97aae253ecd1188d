// A live daemon whose checkpoint storage fails mid-run: the directory turns read-only, or the
// disk fills up. Each failure is a clear error in the log and a count on /metrics, training goes on to
// the end, no corrupt or partial checkpoint is left, and the newest valid checkpoint still loads. The
// final checkpoint cannot be written either, so the daemon reports the finished run and then exits with the user error code
// naming the problem and the checkpoint that remains.
//
// Both cases mount a small tmpfs for the checkpoints (root only; skipped with the reason otherwise).
#include <catch2/catch.hpp>

#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <functional>
#include <filesystem>
#include <regex>
#include <sstream>
#include <string>

#include "daemon/checkpoint/checkpoint_store.h"
#include "error/exit_code.h"
#include "tests/daemon/http_get.h"
#include "tests/daemon/site_process.h"
#include "tests/support/fashion_mnist.h"
#include "tests/support/start_args.h"
#include "tests/support/temp_dir.h"

namespace fs = std::filesystem;
using meridian::tests::eventually_from_process;
using meridian::tests::SiteProcess;
using meridian::tests::TempDir;
using meridian::tests::StartArgs;

namespace {

// A tmpfs of `size` mounted on `dir` for the test's lifetime.
class TmpfsMount {
 public:
  TmpfsMount(fs::path dir, const std::string& size) : dir_(std::move(dir)) {
    fs::create_directories(dir_);
    const std::string options = "size=" + size + ",mode=0755";
    if (::mount("tmpfs", dir_.c_str(), "tmpfs", 0, options.c_str()) == 0) {
      mounted_ = true;
    } else {
      error_ = std::strerror(errno);
    }
  }
  ~TmpfsMount() {
    lift_read_only();
    if (mounted_) ::umount2(dir_.c_str(), MNT_DETACH);
  }
  TmpfsMount(const TmpfsMount&) = delete;
  TmpfsMount& operator=(const TmpfsMount&) = delete;

  bool mounted() const { return mounted_; }
  const std::string& error() const { return error_; }
  // Covers the directory with an empty read-only tmpfs: every write then fails with EROFS, as on a
  // file system the kernel remounted read-only after errors. (Remounting this tmpfs itself read-only
  // is refused while the daemon holds its lock file open for writing.) lift_read_only() uncovers the
  // files written before.
  bool make_read_only() {
    covered_ = ::mount("tmpfs", dir_.c_str(), "tmpfs", MS_RDONLY, "size=64k") == 0;
    return covered_;
  }
  void lift_read_only() {
    if (covered_) ::umount2(dir_.c_str(), MNT_DETACH);
    covered_ = false;
  }

 private:
  fs::path dir_;
  bool mounted_ = false;
  bool covered_ = false;
  std::string error_;
};

double metric(int port, const std::string& name) {
  const auto body = meridian::tests::http_body(meridian::tests::http_get(port, "/metrics"));
  std::istringstream lines(body);
  for (std::string line; std::getline(lines, line);)
    if (line.rfind(name + " ", 0) == 0) return std::stod(line.substr(name.size() + 1));
  return -1;
}

// Runs one local site with its checkpoints on a tmpfs of `size`; `break_storage` makes the storage
// fail once the first checkpoint is there. Checks everything the header promises.
void run_with_failing_storage(const std::string& size, const std::function<bool(TmpfsMount&)>& break_storage,
                              const std::string& expected_error) {
  if (::geteuid() != 0) {
    WARN("SKIPPED: mounting a tmpfs for the checkpoints needs root");
    return;
  }
  MERIDIAN_SKIP_WITHOUT_FASHION_MNIST();
  TempDir dir;
  const fs::path checkpoints = dir.path() / "ckpt";
  TmpfsMount mount(checkpoints, size);
  if (!mount.mounted()) {
    WARN("SKIPPED: cannot mount a tmpfs here: " << mount.error());
    return;
  }
  SiteProcess site(dir.path() / "run", StartArgs("solo")
                                           .set("--metrics-address", "127.0.0.1:0")
                                           .set("--algo", "local")
                                           .mlp(64)
                                           .set("--epochs", 5)
                                           .set("--eval-every", 100000)
                                           .set("--checkpoint-dir", checkpoints)
                                           .set("--checkpoint-interval", "0.2")
                                           .set("--checkpoint-keep", 1)
                                           .set("--seed", 5));
  std::smatch m;
  std::string log;
  REQUIRE(eventually_from_process([&] {
    log = site.log();
    return std::regex_search(log, m, std::regex("metrics on http://127\\.0\\.0\\.1:([0-9]+)/metrics")) || site.exited();
  }));
  INFO("log:\n" << site.log());
  REQUIRE_FALSE(site.exited());
  const int port = std::stoi(m[1]);
  meridian::daemon::CheckpointStore store(checkpoints, 1);
  REQUIRE(eventually_from_process([&] { return !store.list().empty() || site.exited(); }));
  REQUIRE_FALSE(site.exited());
  REQUIRE(break_storage(mount));

  // Failures are counted while the site is still training, and training goes on.
  REQUIRE(eventually_from_process([&] { return site.exited() || metric(port, "meridian_checkpoint_failures_total") >= 2; }));
  REQUIRE_FALSE(site.exited());
  const double step_at_failure = metric(port, "meridian_step");
  CHECK(eventually_from_process([&] { return site.exited() || metric(port, "meridian_step") > step_at_failure + 20; }));

  // The run finishes (result written); the final checkpoint fails too, so the exit code says so.
  CHECK(site.wait_exit(std::chrono::seconds(300)) == meridian::error::kExitUser);
  CHECK(site.has_result());
  const auto final_log = site.log();
  CHECK(final_log.find("checkpoint failed, training goes on with the previous checkpoint kept") != std::string::npos);
  CHECK(final_log.find(expected_error) != std::string::npos);
  CHECK(final_log.find("the final checkpoint could not be written") != std::string::npos);
  CHECK(final_log.find("the newest valid checkpoint is " + checkpoints.string()) != std::string::npos);

  // Nothing corrupt or partial: only checkpoint files, and the newest loads without complaint.
  mount.lift_read_only();
  for (const auto& e : fs::directory_iterator(checkpoints)) {
    const auto name = e.path().filename().string();
    INFO("file " << name);
    CHECK((name.rfind("checkpoint-", 0) == 0 || name == ".meridian.lock"));
  }
  const auto loaded = store.load_newest();
  REQUIRE(loaded.checkpoint);
  CHECK(loaded.skipped.empty());
  CHECK(loaded.checkpoint->step > 0);
  CHECK(std::all_of(loaded.checkpoint->parameters.begin(), loaded.checkpoint->parameters.end(),
                    [](float v) { return std::isfinite(v); }));
}

}  // namespace

TEST_CASE("a checkpoint directory that turns read-only mid-run: clear error, training goes on, old checkpoint intact",
          "[daemon][checkpoint][storage][process]") {
  run_with_failing_storage(
      "4m", [](TmpfsMount& mount) { return mount.make_read_only(); }, "Read-only file system");
}

TEST_CASE("a checkpoint disk that fills up mid-run: clear error, training goes on, no partial checkpoint",
          "[daemon][checkpoint][storage][process]") {
  // One checkpoint of this model (about 400 KB: parameters and momentum) fits, a second beside it does not:
  // rotation removes the old one only after the new one is complete, so every later write runs out of space.
  run_with_failing_storage(
      "600k", [](TmpfsMount&) { return true; }, "No space left on device");
}
