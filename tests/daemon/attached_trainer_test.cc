// `meridian start --trainer attached` with real PyTorch trainer processes (Debian's python3-torch on the
// CPU, through python/meridian): sites over CurveZMQ on 127.0.0.1, each a daemon and a trainer, run
// every algorithm to the end, every site learns, and their models agree as the algorithm says
// (allreduce: the same bits on every site; diloco: the same outer parameters; local: each site its own
// model, the one plain PyTorch trains; dts, sgp, dsync, diloco-gossip: far closer than sites that
// train alone). Agreement at join covers the declared tensors, and each kind of bad input
// from the trainer is refused with its message and counted.
#include <catch2/catch.hpp>

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "daemon/checkpoint/checkpoint.h"
#include "tests/daemon/attached_federation.h"
#include "tests/daemon/federation_process_support.h"
#include "tests/daemon/http_get.h"
#include "tests/daemon/site_process.h"
#include "tests/support/child_process.h"
#include "tests/support/fashion_mnist.h"
#include "tests/support/file_contents.h"
#include "tests/support/temp_dir.h"

namespace fs = std::filesystem;
using meridian::tests::eventually_from_process;
using meridian::tests::SiteKeys;
using meridian::tests::SiteProcess;
using meridian::tests::TempDir;
using meridian::tests::StartArgs;

using namespace meridian::tests::attached;

namespace {

// The example's arguments for site i of n: its interleaved part of the first 2000 training rows.
std::vector<std::string> example_args(int i, int n, const fs::path& save) {
  return {kExample, "--rows", "2000", "--test-rows", "500", "--epochs", "3",
          "--part", std::to_string(i) + "/" + std::to_string(n), "--save", save.string()};
}

}  // namespace

TEST_CASE("attached PyTorch trainers run every algorithm across CurveZMQ sites", "[daemon][process][attached]") {
  if (!have_torch()) {
    WARN("SKIPPED: needs /usr/bin/python3 with numpy and torch");
    return;
  }
  MERIDIAN_SKIP_WITHOUT_FASHION_MNIST();
  const std::string algo =
      GENERATE(as<std::string>{}, "allreduce", "diloco", "local", "dts", "sgp", "dsync", "diloco-gossip");
  DYNAMIC_SECTION(algo) {
    // sgp and dsync on three sites, so that a mix is not simply the pair's mean. diloco-gossip on two:
    // with three, each trainer's inner steps since the last outer sync leave the final models nearly
    // as far apart as alone, on a run this short.
    const bool gossip = algo == "sgp" || algo == "dsync";
    const int sites = gossip ? 3 : 2;
    AttachedFederation f(sites);
    for (int i = 0; i < sites; ++i) {
      auto site = f.args(i, algo);
      if (algo == "diloco" || algo == "diloco-gossip") site.set("--inner-steps", 4).set("--overlap", 1);
      if (algo == "dts") site.set("--period", 4).set("--delay", 1);
      if (algo == "dsync") site.set("--delay", 1);
      f.start(i, site, example_args(i, sites, f.dir.path() / (f.names[static_cast<std::size_t>(i)] + ".pt")));
    }
    // Three epochs of each site's part of the first 2000 rows, in batches of 64; the run is the
    // smallest site's.
    const std::string steps = sites == 2 ? "46" : "31";
    std::vector<double> accuracy;
    for (int i = 0; i < sites; ++i) {
      const int trainer_exit = f.trainers[static_cast<std::size_t>(i)]->wait_exit();
      const int site_exit = f.sites[static_cast<std::size_t>(i)]->wait_exit();
      INFO(f.logs());
      REQUIRE(trainer_exit == 0);
      REQUIRE(site_exit == 0);
      CHECK(f.sites[static_cast<std::size_t>(i)]->has_result());
      const auto output = f.trainers[static_cast<std::size_t>(i)]->output();
      CHECK(contains(output, "\"steps\": " + steps));
      accuracy.push_back(json_number(output, "test_accuracy"));
    }
    INFO(f.logs());
    const auto model = [&](int i) { return f.dir.path() / (f.names[static_cast<std::size_t>(i)] + ".pt"); };
    const auto a = f.last_checkpoint(0), b = f.last_checkpoint(1);
    REQUIRE(a.step == b.step);
    // Every site learns: three epochs of 700-1000 rows take the MLP well past chance (10%).
    for (const double acc : accuracy) CHECK(acc > 0.5);
    // Two plain PyTorch runs on two sites' parts: how far apart training without a federation leaves them.
    const auto native = [&](int i) {
      const auto out = f.dir.path() / ("native-" + std::to_string(i) + ".pt");
      auto args = example_args(i, sites, out);
      args.insert(args.begin() + 1, "--native");
      args.insert(args.begin(), kPython);
      const auto r = meridian::tests::run_command(args);
      INFO(r.output);
      REQUIRE(r.exit_code == 0);
      return out;
    };
    if (algo == "allreduce") {
      // The ring's all-gather gives every site the same bits, and the trainers' updates of the same
      // averaged gradient keep them so: the final checkpoints hold each trainer's final model.
      CHECK(a.parameters == b.parameters);
      CHECK(same_tensors(model(0), model(1)));
    } else if (algo == "diloco") {
      // The outer parameters are the same on every site (each keeps its inner progress since the last sync).
      REQUIRE(a.find_optimizer_state("diloco-global") != nullptr);
      CHECK(*a.find_optimizer_state("diloco-global") == *b.find_optimizer_state("diloco-global"));
    } else if (algo == "local") {
      // Independent models, each exactly the one plain PyTorch trains on the site's part.
      CHECK(a.parameters != b.parameters);
      CHECK(same_tensors(model(0), native(0)));
    } else {
      // dts, sgp, dsync and diloco-gossip mix towards consensus without reaching it exactly at every
      // step (delayed windows, push-sum, groups, outer gossip): the sites end far closer to each other
      // than two sites that train alone, and each moved away from the shared start.
      const double spread = distance(model(0), model(1));
      const double alone = distance(native(0), native(1));
      INFO("spread " << spread << ", alone " << alone);
      CHECK(spread > 0);
      CHECK(spread < 0.5 * alone);
    }
  }
}

TEST_CASE("a site whose attached model differs is refused at join, naming both models",
          "[daemon][process][attached][join]") {
  if (!have_torch()) {
    WARN("SKIPPED: needs /usr/bin/python3 with numpy and torch");
    return;
  }
  AttachedFederation f(2);
  f.start(0, f.args(0, "allreduce"), {kCheck, f.run_dir(0).string(), "50"});
  f.start(1, f.args(1, "allreduce"), {kCheck, f.run_dir(1).string(), "50", "--width", "3"});
  CHECK(f.sites[1]->wait_exit() != 0);
  CHECK(f.trainers[1]->wait_exit() == 0);
  INFO(f.logs());
  const std::string joiner = f.sites[1]->log();
  CHECK(contains(joiner, "a refuses this site: model differs (a: attached model, 2 tensors (10 parameters); "
                         "this site: attached model, 2 tensors (15 parameters))"));
  // Its trainer, waiting for the run to start, hears that the site has gone.
  CHECK(contains(f.trainers[1]->output(), "\"outcome\": \"refused\", \"error\": \"the site closed the trainer channel"));
  // The refusing site carries on, waiting for a proper peer: stopped, it ends cleanly.
  REQUIRE(eventually_from_process([&] { return contains(f.sites[0]->log(), "refused at join: model differs") || f.sites[0]->exited(); }));
  CHECK_FALSE(f.sites[0]->exited());
  f.sites[0]->signal(SIGTERM);
  CHECK(f.sites[0]->wait_exit() == 0);
}

TEST_CASE("an attached site refuses and counts a bad declaration, a second trainer and NaN gradients",
          "[daemon][process][attached][hostile]") {
  if (!have_torch()) {
    WARN("SKIPPED: needs /usr/bin/python3 with numpy and torch");
    return;
  }
  TempDir dir;
  const auto run = dir.path() / "a";
  SiteProcess site(run, StartArgs("a")
                            .set("--trainer", "attached")
                            .set("--algo", "allreduce")
                            .set("--site-count", 1)
                            .set("--metrics-address", "127.0.0.1:0")
                            .set("--round-timeout", 60));
  int port = 0;
  REQUIRE(eventually_from_process([&] { return (port = meridian::tests::metrics_port(site.log())) != 0 || site.exited(); }));
  REQUIRE(port != 0);
  const auto counter = [&](const std::string& cause) {
    const auto body = meridian::tests::http_body(meridian::tests::http_get(port, "/metrics"));
    const std::string series = "meridian_trainer_refusals_total{cause=\"" + cause + "\"} ";
    const auto at = body.find(series);
    return at == std::string::npos ? 0.0 : std::stod(body.substr(at + series.size()));
  };

  // A declaration no model can have: refused with its reason; the site waits for a proper trainer.
  TrainerProcess bad(run, dir.path() / "bad.out", {kCheck, run.string(), "5", "--bad-dtype"});
  REQUIRE(bad.wait_exit() == 0);
  CHECK(contains(bad.output(), "parameter 'w': dtype 'int8' is not float32, float16, bfloat16 or float64"));
  CHECK(counter("model") == 1);

  // A trainer that holds the site while a second one tries to attach; its step 3 carries a NaN
  // gradient, which is refused (the trainer skips that batch) and never reaches the average.
  const auto go = dir.path() / "go";
  TrainerProcess first(run, dir.path() / "first.out",
                       {kCheck, run.string(), "20", "--nan-at", "3", "--hold-until", go.string()});
  REQUIRE(eventually_from_process([&] { return contains(site.log(), "trainer attached") || site.exited(); }));
  TrainerProcess second(run, dir.path() / "second.out", {kCheck, run.string(), "20"});
  REQUIRE(second.wait_exit() == 0);
  std::ofstream(go) << "go\n";
  INFO(site.log() << "\nfirst:\n" << first.output() << "\nsecond:\n" << second.output());
  CHECK(contains(second.output(), "\"outcome\": \"refused\""));
  CHECK(contains(second.output(), "this site already has a trainer attached"));
  REQUIRE(first.wait_exit() == 0);
  CHECK(contains(first.output(), "\"outcome\": \"finished\", \"steps\": 20"));
  CHECK(contains(first.output(), "step 3: gradient element 0 is NaN; the step is refused"));
  CHECK(site.wait_exit() == 0);
  CHECK(contains(site.log(), "trainer refused (busy)"));
  CHECK(contains(site.log(), "trainer refused (non_finite)"));
  CHECK(contains(site.log(), "finished 20 steps of the attached trainer"));
}

TEST_CASE("a trainer that stops calling in, or changes its model's shape, ends the attachment with its reason",
          "[daemon][process][attached][hostile]") {
  if (!have_torch()) {
    WARN("SKIPPED: needs /usr/bin/python3 with numpy and torch");
    return;
  }
  TempDir dir;
  SECTION("silent") {
    const auto run = dir.path() / "silent";
    SiteProcess site(run, StartArgs("a")
                              .set("--trainer", "attached")
                              .set("--algo", "local")
                              .set("--round-timeout", 2)
                              .set("--join-timeout", 10));
    TrainerProcess trainer(run, dir.path() / "t.out", {kCheck, run.string(), "20", "--silent-at", "5"});
    INFO(site.log());
    // The site waits for a trainer to attach again, then stops with the reason; the silent trainer is
    // left to the test's cleanup.
    CHECK(site.wait_exit() != 0);
    CHECK(contains(site.log(), "trainer refused (silent): sent nothing for 2 s"));
    CHECK(contains(site.log(), "the attached trainer: sent nothing for 2 s"));
    CHECK(contains(site.log(), "no trainer attached again within --join-timeout; the site stops"));
  }
  SECTION("reshaped") {
    const auto run = dir.path() / "reshaped";
    SiteProcess site(run, StartArgs("a")
                              .set("--trainer", "attached")
                              .set("--algo", "local")
                              .set("--round-timeout", 5));
    TrainerProcess trainer(run, dir.path() / "t.out", {kCheck, run.string(), "20", "--reshape-at", "5"});
    REQUIRE(trainer.wait_exit() == 0);
    INFO(site.log() << "\ntrainer:\n" << trainer.output());
    CHECK(contains(trainer.output(), "a parameter changed shape from [2, 4] to [3, 4] after it was declared"));
    // The script caught the error and ended; on the way out the package left the site, which
    // checkpoints and stops cleanly.
    CHECK(site.wait_exit() == 0);
    CHECK(contains(site.log(), "stopped at round 5 (5 of 20 steps)"));
  }
}

TEST_CASE("Ctrl-C in the trainer's script leaves the site cleanly, with no socket left behind",
          "[daemon][process][attached]") {
  if (!have_torch()) {
    WARN("SKIPPED: needs /usr/bin/python3 with numpy and torch");
    return;
  }
  TempDir dir;
  const auto run = dir.path() / "a";
  SiteProcess site(run, StartArgs("a").set("--trainer", "attached").set("--algo", "local").set("--round-timeout", 60));
  TrainerProcess trainer(run, dir.path() / "t.out", {kCheck, run.string(), "50", "--interrupt-at", "7"});
  const int trainer_exit = trainer.wait_exit();
  const int site_exit = site.wait_exit();
  INFO(site.log() << "\ntrainer:\n" << trainer.output());
  // The script died of its KeyboardInterrupt; on the way out the package said bye to the site.
  CHECK(trainer_exit != 0);
  CHECK(contains(trainer.output(), "KeyboardInterrupt"));
  CHECK(site_exit == 0);
  CHECK(contains(site.log(), "stopped at round 7 (7 of 50 steps)"));
  CHECK_FALSE(contains(site.log(), "trainer refused"));
  // The last checkpoint holds the trainer's parameters at its interruption, and nothing stays in the
  // run directory for the next start to trip over (the segment is a memfd, with no file).
  CHECK(meridian::daemon::read_checkpoint_file(site.checkpoints().back()).step == 7);
  CHECK_FALSE(fs::exists(run / "trainer.sock"));
}

TEST_CASE("a trainer of another user is refused by its credentials, and a stale socket file is replaced",
          "[daemon][process][attached][hostile]") {
  if (!have_torch()) {
    WARN("SKIPPED: needs /usr/bin/python3 with numpy and torch");
    return;
  }
  TempDir dir;
  const auto run = dir.path() / "a";
  // A socket file left by a daemon that was killed: a new site binds in its place.
  fs::create_directories(run);
  fs::permissions(run, fs::perms::owner_all);
  {
    const int fd = ::socket(AF_UNIX, SOCK_SEQPACKET, 0);
    REQUIRE(fd >= 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    const auto path = (run / "trainer.sock").string();
    std::copy(path.begin(), path.end(), address.sun_path);
    REQUIRE(::bind(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) == 0);
    ::close(fd);  // closed without unlink, as by a SIGKILL
  }
  REQUIRE(fs::is_socket(run / "trainer.sock"));
  SiteProcess site(run, StartArgs("a")
                            .set("--trainer", "attached")
                            .set("--algo", "local")
                            .set("--metrics-address", "127.0.0.1:0")
                            .set("--round-timeout", 60));
  REQUIRE(eventually_from_process([&] { return contains(site.log(), "waiting for a trainer to attach") || site.exited(); }));
  REQUIRE_FALSE(site.exited());

  // Another user, where the file system lets it reach the socket (run directory and socket opened up
  // by hand, which the site never does): the site reads its peer's uid and refuses it. Needs root, to
  // run the trainer as nobody.
  if (::geteuid() != 0 || std::system("command -v setpriv >/dev/null 2>&1") != 0) {
    WARN("SKIPPED the other user: needs root and setpriv to run a trainer as nobody");
  } else {
    fs::permissions(dir.path(), fs::perms::others_exec, fs::perm_options::add);
    fs::permissions(run, fs::perms::others_exec, fs::perm_options::add);
    fs::permissions(run / "trainer.sock", fs::perms::others_read | fs::perms::others_write, fs::perm_options::add);
    const auto r = meridian::tests::run_command(
        {"/usr/bin/setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "/usr/bin/env",
         "MERIDIAN_RUN_DIR=" + run.string(), kPython, kCheck, run.string(), "5"});
    INFO(r.output << "\nsite:\n" << site.log());
    CHECK(contains(r.output, "\"outcome\": \"refused\""));
    CHECK(contains(r.output, "this site's trainer must run as its daemon's user"));
    REQUIRE(eventually_from_process([&] { return contains(site.log(), "trainer refused (other_user)") || site.exited(); }));
  }
  // The site still waits for its own trainer, which runs to the end.
  TrainerProcess own(run, dir.path() / "own.out", {kCheck, run.string(), "5"});
  CHECK(own.wait_exit() == 0);
  CHECK(site.wait_exit() == 0);
  INFO(site.log() << "\nown:\n" << own.output());
  CHECK(contains(own.output(), "\"outcome\": \"finished\", \"steps\": 5"));
}

TEST_CASE("a SIGKILLed trainer leaves its site a member, and one started again continues from the site's state",
          "[daemon][process][attached]") {
  if (!have_torch()) {
    WARN("SKIPPED: needs /usr/bin/python3 with numpy and torch");
    return;
  }
  // sgp (the parameter hook) and dts (the update hook, whose momentum the site holds).
  const std::string algo = GENERATE(as<std::string>{}, "sgp", "dts");
  DYNAMIC_SECTION(algo) {
    AttachedFederation f(2);
    const auto go = f.dir.path() / "go";
    for (int i = 0; i < 2; ++i) {
      auto site = f.args(i, algo).set("--round-timeout", 60).set("--metrics-address", "127.0.0.1:0");
      if (algo == "dts") site.set("--period", 4).set("--delay", 1);
      // a pauses at step 20 until the test lets it go; b's trainer is killed at its step 10.
      std::vector<std::string> trainer{kCheck, f.run_dir(i).string(), "60", "--pause-file", go.string(),
                                       "--pause-at", i == 0 ? "20" : "10"};
      f.start(i, site, trainer);
    }
    auto& b = *f.trainers[1];
    REQUIRE(eventually_from_process([&] { return contains(b.output(), "\"paused\": 10") || f.sites[1]->exited(); }));
    b.signal(SIGKILL);
    REQUIRE(eventually_from_process(
        [&] { return contains(f.sites[1]->log(), "the site goes on without it") || f.sites[1]->exited(); }));
    REQUIRE_FALSE(f.sites[1]->exited());
    // b's site serves its rounds meanwhile (a reaches its step 20); a trainer started again connects,
    // and a goes on: b's site takes the new trainer between two rounds.
    TrainerProcess again(f.run_dir(1), f.dir.path() / "b-again.out", {kCheck, f.run_dir(1).string(), "60"});
    REQUIRE(eventually_from_process([&] { return contains(again.output(), "\"connected\": true") || f.sites[1]->exited(); }));
    REQUIRE(eventually_from_process([&] { return contains(f.trainers[0]->output(), "\"paused\": 20"); }));
    std::ofstream(go) << "go\n";
    const int again_exit = again.wait_exit();
    const int a_exit = f.trainers[0]->wait_exit();
    const int site_a = f.sites[0]->wait_exit(), site_b = f.sites[1]->wait_exit();
    INFO(f.logs() << "\nb again:\n" << again.output());
    CHECK(a_exit == 0);
    CHECK(again_exit == 0);
    CHECK(site_a == 0);
    CHECK(site_b == 0);
    // The federation ran its 60 rounds; the new trainer ran what was left of them, from b's parameters.
    CHECK(contains(f.trainers[0]->output(), "\"outcome\": \"finished\", \"steps\": 60"));
    CHECK(contains(again.output(), "\"resumed\": true"));
    CHECK(contains(again.output(), "\"outcome\": \"finished\""));
    CHECK_FALSE(contains(again.output(), "\"steps\": 60"));
    CHECK(contains(f.sites[1]->log(), "trainer refused (disconnected): closed the channel before the run's end"));
    CHECK(contains(f.sites[1]->log(), "the trainer attached again"));
    CHECK(f.last_checkpoint(0).step == f.last_checkpoint(1).step);
    // b stayed in the view throughout: a never saw a view without it.
    CHECK_FALSE(contains(f.sites[0]->log(), " in force: a\n"));
  }
}

TEST_CASE("a daemon restarted under its trainer resumes from its checkpoint, and the trainer attaches again",
          "[daemon][process][attached]") {
  if (!have_torch()) {
    WARN("SKIPPED: needs /usr/bin/python3 with numpy and torch");
    return;
  }
  TempDir dir;
  const auto run = dir.path() / "a";
  const auto go = dir.path() / "go";
  const auto args = StartArgs("a")
                        .set("--trainer", "attached")
                        .set("--algo", "local")
                        .set("--checkpoint-interval", 0.001)  // a checkpoint after every step
                        .set("--round-timeout", 60)
                        .list();
  auto site = std::make_unique<SiteProcess>(run, args);
  TrainerProcess trainer(run, dir.path() / "t.out",
                         {kCheck, run.string(), "40", "--pause-at", "20", "--pause-file", go.string()});
  REQUIRE(eventually_from_process([&] { return contains(trainer.output(), "\"paused\": 20") || site->exited(); }));
  REQUIRE_FALSE(site->exited());
  // The daemon dies under the trainer, which is between two steps, and is started again.
  site->signal(SIGKILL);
  (void)site->wait_exit();
  site = std::make_unique<SiteProcess>(run, args);
  std::ofstream(go) << "go\n";
  const int trainer_exit = trainer.wait_exit();
  const int site_exit = site->wait_exit();
  INFO(site->log() << "\ntrainer:\n" << trainer.output());
  CHECK(trainer_exit == 0);
  CHECK(site_exit == 0);
  // The new daemon resumed from the checkpoint of round 20; the trainer's step that met the dead
  // daemon was dropped, and the trainer ran the 20 rounds left from the checkpoint's parameters.
  CHECK(contains(site->log(), "resuming from"));
  CHECK(contains(trainer.output(), "waiting up to 300 s for the site to come back"));
  CHECK(contains(trainer.output(), "attached again to site a; it resumed from its checkpoint, 20 steps left"));
  // The script counts its calls of opt.step(): 20, the dropped one, and the 20 left.
  CHECK(contains(trainer.output(), "\"outcome\": \"finished\", \"steps\": 41"));
  CHECK(meridian::daemon::read_checkpoint_file(site->checkpoints().back()).step == 40);
}
