// Sites that train with torch.distributed inside (real processes: DistributedDataParallel over gloo,
// Debian's python3-torch on the CPU): rank 0 of each site attaches to its `meridian start --trainer
// attached`, the other ranks receive what the algorithm mixed by broadcast. The ranks of a site stay
// identical to the bit under each kind of hook (gradients, update, parameters) and the federation
// finishes; a rank that dies stops the others with a clear error, the site goes on without its
// trainer, and the group started again attaches and finishes the run. An uncaught exception on rank 0
// counts as the group's failure, where in a process alone it leaves the site.
#include <catch2/catch.hpp>

#include <signal.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "tests/daemon/attached_federation.h"
#include "tests/daemon/http_get.h"
#include "tests/support/fashion_mnist.h"

namespace fs = std::filesystem;
using meridian::tests::eventually_from_process;
using meridian::tests::SiteProcess;
using meridian::tests::TempDir;
using meridian::tests::StartArgs;

using namespace meridian::tests::attached;

namespace {

// RANK and WORLD_SIZE for rank r of a site's two.
std::vector<std::string> rank_env(int r) { return {"RANK=" + std::to_string(r), "WORLD_SIZE=2"}; }

}  // namespace

TEST_CASE("two sites of two DDP ranks each keep their ranks bit-identical and finish",
          "[daemon][process][attached][ranks]") {
  if (!have_torch()) {
    WARN("SKIPPED: needs /usr/bin/python3 with numpy and torch");
    return;
  }
  MERIDIAN_SKIP_WITHOUT_FASHION_MNIST();
  // One algorithm per hook: gradients before the ranks' optimizer step, the site's update in its
  // place, the parameters after it.
  const std::string algo = GENERATE(as<std::string>{}, "allreduce", "dts", "sgp");
  DYNAMIC_SECTION(algo) {
    AttachedFederation f(2);
    std::vector<std::unique_ptr<TrainerProcess>> ranks;  // site a's two, then site b's
    const auto saved = [&](int site, int r) {
      return f.dir.path() / (f.names[static_cast<std::size_t>(site)] + ".pt.rank" + std::to_string(r));
    };
    for (int i = 0; i < 2; ++i) {
      auto args = f.args(i, algo);
      if (algo == "dts") args.set("--period", 4).set("--delay", 1);
      if (i > 0) args.join(f.names[0] + "@" + f.sites[0]->endpoint(std::chrono::seconds(120)));
      f.sites.push_back(std::make_unique<SiteProcess>(f.run_dir(i), args.list()));
      const auto name = f.names[static_cast<std::size_t>(i)];
      for (int r = 0; r < 2; ++r) {
        // The site's interleaved half of the first 2000 rows, each rank on its half of that.
        ranks.push_back(std::make_unique<TrainerProcess>(
            f.run_dir(i), f.dir.path() / (name + "-rank" + std::to_string(r) + ".out"),
            std::vector<std::string>{kExample, "--rows", "2000", "--test-rows", "500", "--epochs", "2", "--part",
                                     std::to_string(i) + "/2", "--dist-init",
                                     "file://" + (f.dir.path() / ("store-" + name)).string(), "--save",
                                     (f.dir.path() / (name + ".pt")).string()},
            rank_env(r)));
      }
    }
    std::vector<int> exits;
    for (auto& r : ranks) exits.push_back(r->wait_exit());
    const int site_a = f.sites[0]->wait_exit(), site_b = f.sites[1]->wait_exit();
    std::string outputs;
    for (auto& r : ranks) outputs += r->output() + "\n";
    INFO(f.sites[0]->log() << "\n" << f.sites[1]->log() << "\nranks:\n" << outputs);
    for (const int e : exits) CHECK(e == 0);
    CHECK(site_a == 0);
    CHECK(site_b == 0);
    // Two epochs of 500 rows per rank in batches of 64: 15 steps, the run's length on every rank.
    for (auto& r : ranks) CHECK(contains(r->output(), "\"steps\": 15,"));
    CHECK(contains(f.sites[0]->log(), "finished 15 steps of the attached trainer"));
    for (int i = 0; i < 2; ++i) CHECK(same_tensors(saved(i, 0), saved(i, 1)));
    // allreduce gives both sites the same averaged gradients: all four ranks hold the same bits.
    if (algo == "allreduce") CHECK(same_tensors(saved(0, 0), saved(1, 0)));
  }
}

TEST_CASE("a rank that dies stops its site's other ranks with a clear error and the group started again finishes",
          "[daemon][process][attached][ranks]") {
  if (!have_torch()) {
    WARN("SKIPPED: needs /usr/bin/python3 with numpy and torch");
    return;
  }
  TempDir dir;
  const auto run = dir.path() / "a";
  const auto go = dir.path() / "go";
  SiteProcess site(run, StartArgs("a").set("--trainer", "attached").set("--algo", "local").set("--round-timeout", 60));
  // Both ranks pause at step 5, after their backward pass; rank 1 is killed there, then rank 0 goes on.
  std::vector<std::unique_ptr<TrainerProcess>> group;
  for (int r = 0; r < 2; ++r)
    group.push_back(std::make_unique<TrainerProcess>(
        run, dir.path() / ("rank" + std::to_string(r) + ".out"),
        std::vector<std::string>{kCheck, run.string(), "30", "--pause-at", "5", "--pause-file", go.string(),
                                 "--dist-init", "file://" + (dir.path() / "store-1").string()},
        rank_env(r)));
  REQUIRE(eventually_from_process([&] { return contains(group[1]->output(), "\"paused\": 5") || site.exited(); }));
  REQUIRE(eventually_from_process([&] { return contains(group[0]->output(), "\"paused\": 5") || site.exited(); }));
  group[1]->signal(SIGKILL);
  (void)group[1]->wait_exit();
  std::ofstream(go) << "go\n";
  CHECK(group[0]->wait_exit() == 0);
  INFO(site.log() << "\nrank 0:\n" << group[0]->output());
  // Rank 0's step finds its peer gone: it stops with the reason, and leaves the site's channel
  // without a bye, so that the site keeps its state for the group's restart.
  CHECK(contains(group[0]->output(), "\"outcome\": \"error\", \"error\": \"rank 0 of this site's 2 ranks: another "
                                     "rank failed ("));
  CHECK(contains(group[0]->output(), "the site's ranks train together, so this one stops"));
  CHECK(contains(group[0]->output(), "this site's process group failed (RankLost"));
  REQUIRE(eventually_from_process([&] { return contains(site.log(), "the site goes on without it") || site.exited(); }));
  REQUIRE_FALSE(site.exited());
  CHECK(contains(site.log(), "trainer refused (disconnected): closed the channel before the run's end"));

  // The group started again attaches, runs the rounds left, and its ranks end identical.
  std::vector<std::unique_ptr<TrainerProcess>> again;
  for (int r = 0; r < 2; ++r)
    again.push_back(std::make_unique<TrainerProcess>(
        run, dir.path() / ("again" + std::to_string(r) + ".out"),
        std::vector<std::string>{kCheck, run.string(), "30", "--dist-init",
                                 "file://" + (dir.path() / "store-2").string(), "--save",
                                 (dir.path() / "m.pt").string()},
        rank_env(r)));
  for (auto& r : again) CHECK(r->wait_exit() == 0);
  CHECK(site.wait_exit() == 0);
  INFO(site.log() << "\nagain 0:\n" << again[0]->output() << "\nagain 1:\n" << again[1]->output());
  for (auto& r : again) CHECK(contains(r->output(), "\"outcome\": \"finished\""));
  CHECK(contains(site.log(), "the trainer attached again"));
  CHECK(contains(site.log(), "finished 30 steps of the attached trainer"));
  CHECK(same_tensors(dir.path() / "m.pt.rank0", dir.path() / "m.pt.rank1"));
}

TEST_CASE("an uncaught exception on rank 0 of a group keeps the site's state for the group; alone, it leaves the site",
          "[daemon][process][attached][ranks]") {
  if (!have_torch()) {
    WARN("SKIPPED: needs /usr/bin/python3 with numpy and torch");
    return;
  }
  TempDir dir;
  const auto run = dir.path() / "a";
  // The exception is raised at step 5 after the backward pass, outside any handler of the script.
  const std::string raised = "RuntimeError: the training loop failed at step 5";

  SECTION("rank 0 of two") {
    SiteProcess site(run, StartArgs("a")
                              .set("--trainer", "attached")
                              .set("--algo", "local")
                              .set("--metrics-address", "127.0.0.1:0")
                              .set("--round-timeout", 60));
    int port = 0;
    REQUIRE(eventually_from_process([&] { return (port = meridian::tests::metrics_port(site.log())) != 0 || site.exited(); }));
    REQUIRE(port != 0);
    const auto disconnected = [&] {
      const auto body = meridian::tests::http_body(meridian::tests::http_get(port, "/metrics"));
      const std::string series = "meridian_trainer_refusals_total{cause=\"disconnected\"} ";
      const auto at = body.find(series);
      return at == std::string::npos ? 0.0 : std::stod(body.substr(at + series.size()));
    };
    std::vector<std::unique_ptr<TrainerProcess>> group;
    for (int r = 0; r < 2; ++r)
      group.push_back(std::make_unique<TrainerProcess>(
          run, dir.path() / ("rank" + std::to_string(r) + ".out"),
          std::vector<std::string>{kCheck, run.string(), "30", "--raise-at", "5", "--dist-init",
                                   "file://" + (dir.path() / "store-1").string()},
          rank_env(r)));
    const int rank0 = group[0]->wait_exit();
    const int rank1 = group[1]->wait_exit();
    INFO(site.log() << "\nrank 0:\n" << group[0]->output() << "\nrank 1:\n" << group[1]->output());
    // Rank 0's script died of its exception, with Python's traceback; the package's hook took it for
    // the group's failure (on rank 0 that is mostly another rank's, seen through DDP) and left the
    // channel without a bye.
    CHECK(rank0 == 1);
    CHECK(contains(group[0]->output(), "Traceback (most recent call last)"));
    CHECK(contains(group[0]->output(), raised));
    CHECK(contains(group[0]->output(), "this site's process group failed (" + raised +
                                           "); the site goes on without its trainer and takes the ranks back when "
                                           "they attach again"));
    // Rank 1, waiting for rank 0's broadcast of the step, finds it gone.
    CHECK(rank1 == 0);
    CHECK(contains(group[1]->output(),
                   "\"outcome\": \"error\", \"error\": \"rank 1 of this site's 2 ranks: another "
                   "rank failed ("));
    // The site counts its trainer lost and keeps its state for the group.
    REQUIRE(eventually_from_process([&] { return contains(site.log(), "the site goes on without it") || site.exited(); }));
    REQUIRE_FALSE(site.exited());
    CHECK(contains(site.log(), "trainer refused (disconnected): closed the channel before the run's end"));
    CHECK(disconnected() == 1);
    CHECK_FALSE(contains(site.log(), "stopped at round"));

    // The group started again takes the site back and finishes the run.
    std::vector<std::unique_ptr<TrainerProcess>> again;
    for (int r = 0; r < 2; ++r)
      again.push_back(
          std::make_unique<TrainerProcess>(run, dir.path() / ("again" + std::to_string(r) + ".out"),
                                           std::vector<std::string>{kCheck, run.string(), "30", "--dist-init",
                                                                    "file://" + (dir.path() / "store-2").string()},
                                           rank_env(r)));
    for (auto& r : again) CHECK(r->wait_exit() == 0);
    CHECK(site.wait_exit() == 0);
    INFO(site.log() << "\nagain 0:\n" << again[0]->output());
    CHECK(contains(site.log(), "the trainer attached again"));
    CHECK(contains(site.log(), "finished 30 steps of the attached trainer"));
  }

  SECTION("a process alone") {
    SiteProcess site(run,
                     StartArgs("a").set("--trainer", "attached").set("--algo", "local").set("--round-timeout", 60));
    TrainerProcess trainer(run, dir.path() / "t.out", {kCheck, run.string(), "30", "--raise-at", "5"});
    const int trainer_exit = trainer.wait_exit();
    const int site_exit = site.wait_exit();
    INFO(site.log() << "\ntrainer:\n" << trainer.output());
    // No group to fail: the exception is the script's end, and on the way out the package finished
    // the step in flight, handed over the parameters and said bye. The site checkpoints and stops.
    CHECK(trainer_exit == 1);
    CHECK(contains(trainer.output(), raised));
    CHECK_FALSE(contains(trainer.output(), "process group failed"));
    CHECK(site_exit == 0);
    CHECK(contains(site.log(), "stopped at round 5 (5 of 30 steps)"));
    CHECK_FALSE(contains(site.log(), "trainer refused"));
  }
}
