// `meridian start --trainer attached` with real PyTorch trainer processes (Debian's python3-torch on the
// CPU, through python/meridian): sites over CurveZMQ on 127.0.0.1, each a daemon and a trainer, run
// each algorithm that runs attached to the end, and their models agree as the algorithm says (allreduce:
// the same bits on every site; diloco: the same outer parameters; local: each site its own model, the
// one plain PyTorch trains). Agreement at join covers the declared tensors, and each kind of bad input
// from the trainer is refused with its message and counted.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "daemon/checkpoint.h"
#include "tests/daemon/federation_process_support.h"
#include "tests/daemon/http_get.h"
#include "tests/daemon/site_process.h"
#include "tests/daemon/temp_dir.h"
#include "tests/support/child_process.h"
#include "tests/support/fashion_mnist.h"
#include "tests/support/file_contents.h"

namespace fs = std::filesystem;
using meridian::testing::eventually;
using meridian::testing::SiteKeys;
using meridian::testing::SiteProcess;
using meridian::testing::TempDir;
using meridian::tests::StartArgs;

namespace {

// Debian's interpreter, which python3-torch is installed for, whatever python3 comes first on PATH.
const std::string kPython = "/usr/bin/python3";
const std::string kExample = std::string(MERIDIAN_SOURCE_DIR) + "/examples/pytorch/fashion_mnist.py";
const std::string kCheck = std::string(MERIDIAN_SOURCE_DIR) + "/tests/daemon/attached_trainer_check.py";

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

bool have_torch() { return std::system((kPython + " -c 'import numpy, torch' >/dev/null 2>&1").c_str()) == 0; }

// A trainer process with MERIDIAN_RUN_DIR set to its site's run directory; what it prints goes to a file.
class TrainerProcess {
 public:
  TrainerProcess(const fs::path& run_dir, const fs::path& out, std::vector<std::string> args) : out_(out) {
    args.insert(args.begin(), {"/usr/bin/env", "MERIDIAN_RUN_DIR=" + run_dir.string(), kPython});
    fs::create_directories(run_dir);
    const int fd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    process_ = std::make_unique<meridian::tests::ChildProcess>(args, meridian::tests::ChildStreams{.out = fd, .err = fd});
    if (fd >= 0) ::close(fd);
  }
  std::string output() const { return meridian::tests::file_contents(out_); }
  int wait_exit() { return process_->wait_exit({std::chrono::seconds(300), std::chrono::milliseconds(50)}); }

 private:
  fs::path out_;
  std::unique_ptr<meridian::tests::ChildProcess> process_;
};

// Sites over CurveZMQ, each `meridian start --trainer attached` with `algo`; site 0 first, the others
// joining it once it listens (after its trainer attached).
struct AttachedFederation {
  TempDir dir;
  std::vector<std::string> names;
  std::unique_ptr<SiteKeys> keys;
  std::vector<std::unique_ptr<SiteProcess>> sites;
  std::vector<std::unique_ptr<TrainerProcess>> trainers;

  explicit AttachedFederation(int count) {
    for (int i = 0; i < count; ++i) names.push_back(std::string(1, static_cast<char>('a' + i)));
    keys = std::make_unique<SiteKeys>(dir.path(), names);
    std::ofstream(dir.path() / "roster.txt") << keys->roster(names);
  }
  StartArgs args(int i, const std::string& algo) const {
    return StartArgs(names[static_cast<std::size_t>(i)])
        .secure(dir.path() / ("keys-" + names[static_cast<std::size_t>(i)]), dir.path() / "roster.txt")
        .set("--trainer", "attached")
        .set("--algo", algo)
        .site(i, static_cast<int>(names.size()))
        .set("--heartbeat-interval", "0.2")
        .set("--round-timeout", 20);
  }
  fs::path run_dir(int i) const { return dir.path() / names[static_cast<std::size_t>(i)]; }
  // Starts site i with `args` and its trainer with `trainer_args`.
  void start(int i, StartArgs site_args, const std::vector<std::string>& trainer_args) {
    if (i > 0) site_args.join(names[0] + "@" + sites[0]->endpoint(std::chrono::seconds(120)));
    sites.push_back(std::make_unique<SiteProcess>(run_dir(i), site_args.list()));
    trainers.push_back(
        std::make_unique<TrainerProcess>(run_dir(i), dir.path() / (names[static_cast<std::size_t>(i)] + ".out"), trainer_args));
  }
  std::string logs() const {
    std::string text;
    for (std::size_t i = 0; i < sites.size(); ++i)
      text += names[i] + ":\n" + sites[i]->log() + "\ntrainer:\n" + trainers[i]->output() + "\n";
    return text;
  }
  meridian::daemon::Checkpoint last_checkpoint(int i) const {
    const auto files = sites[static_cast<std::size_t>(i)]->checkpoints();
    REQUIRE_FALSE(files.empty());
    return meridian::daemon::read_checkpoint_file(files.back());
  }
};

// Whether two state_dicts torch.save wrote hold the same bits.
bool same_tensors(const fs::path& a, const fs::path& b) {
  const auto r = meridian::tests::run_shell(
      kPython + " -c 'import sys, torch; a, b = torch.load(sys.argv[1]), torch.load(sys.argv[2]); "
                "print(\"same\" if a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a) else \"differ\")' '" +
      a.string() + "' '" + b.string() + "'");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  return contains(r.output, "same");
}

// The example's arguments for site i of n: its interleaved part of the first 2000 training rows.
std::vector<std::string> example_args(int i, int n, const fs::path& save) {
  return {kExample, "--rows", "2000", "--test-rows", "500", "--part", std::to_string(i) + "/" + std::to_string(n),
          "--save", save.string()};
}

}  // namespace

TEST_CASE("attached PyTorch trainers run allreduce, diloco and local across CurveZMQ sites",
          "[daemon][process][attached]") {
  if (!have_torch() || !meridian::tests::have_fashion_mnist()) {
    WARN("SKIPPED: needs /usr/bin/python3 with numpy and torch, and Fashion-MNIST");
    return;
  }
  const std::string algo = GENERATE(as<std::string>{}, "allreduce", "diloco", "local");
  DYNAMIC_SECTION(algo) {
    constexpr int kSites = 2;
    AttachedFederation f(kSites);
    for (int i = 0; i < kSites; ++i) {
      auto site = f.args(i, algo);
      if (algo == "diloco") site.set("--period", 4).set("--delay", 1);
      f.start(i, site, example_args(i, kSites, f.dir.path() / (f.names[static_cast<std::size_t>(i)] + ".pt")));
    }
    for (int i = 0; i < kSites; ++i) {
      const int trainer_exit = f.trainers[static_cast<std::size_t>(i)]->wait_exit();
      const int site_exit = f.sites[static_cast<std::size_t>(i)]->wait_exit();
      INFO(f.logs());
      REQUIRE(trainer_exit == 0);
      REQUIRE(site_exit == 0);
      CHECK(f.sites[static_cast<std::size_t>(i)]->has_result());
      CHECK(contains(f.trainers[static_cast<std::size_t>(i)]->output(), "\"steps\": 15"));
    }
    INFO(f.logs());
    const auto a = f.last_checkpoint(0), b = f.last_checkpoint(1);
    REQUIRE(a.step == b.step);
    if (algo == "allreduce") {
      // The ring's all-gather gives every site the same bits, and the trainers' updates of the same
      // averaged gradient keep them so: the final checkpoints hold each trainer's final model.
      CHECK(a.parameters == b.parameters);
      CHECK(same_tensors(f.dir.path() / "a.pt", f.dir.path() / "b.pt"));
    } else if (algo == "diloco") {
      // The outer parameters are the same on every site (each keeps its inner progress since the last sync).
      REQUIRE(a.find_optimizer_state("diloco-global") != nullptr);
      CHECK(*a.find_optimizer_state("diloco-global") == *b.find_optimizer_state("diloco-global"));
    } else {
      // Independent models, each exactly the one plain PyTorch trains on the site's part.
      CHECK(a.parameters != b.parameters);
      const auto native = f.dir.path() / "native.pt";
      auto args = example_args(0, kSites, native);
      args.insert(args.begin() + 1, "--native");
      args.insert(args.begin(), kPython);
      const auto r = meridian::tests::run_command(args);
      INFO(r.output);
      REQUIRE(r.exit_code == 0);
      CHECK(same_tensors(f.dir.path() / "a.pt", native));
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
  REQUIRE(eventually([&] { return contains(f.sites[0]->log(), "refused at join: model differs") || f.sites[0]->exited(); }));
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
  REQUIRE(eventually([&] { return (port = meridian::testing::metrics_port(site.log())) != 0 || site.exited(); }));
  REQUIRE(port != 0);
  const auto counter = [&](const std::string& cause) {
    const auto body = meridian::testing::http_body(meridian::testing::http_get(port, "/metrics"));
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
  REQUIRE(eventually([&] { return contains(site.log(), "trainer attached") || site.exited(); }));
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
    SiteProcess site(run, StartArgs("a").set("--trainer", "attached").set("--algo", "local").set("--round-timeout", 2));
    TrainerProcess trainer(run, dir.path() / "t.out", {kCheck, run.string(), "20", "--silent-at", "5"});
    INFO(site.log());
    // The site stops with the reason; the silent trainer is left to the test's cleanup.
    CHECK(site.wait_exit() != 0);
    CHECK(contains(site.log(), "trainer refused (silent): sent nothing for 2 s"));
    CHECK(contains(site.log(), "the attached trainer: sent nothing for 2 s"));
  }
  SECTION("reshaped") {
    const auto run = dir.path() / "reshaped";
    SiteProcess site(run, StartArgs("a").set("--trainer", "attached").set("--algo", "local").set("--round-timeout", 5));
    TrainerProcess trainer(run, dir.path() / "t.out", {kCheck, run.string(), "20", "--reshape-at", "5"});
    REQUIRE(trainer.wait_exit() == 0);
    INFO(site.log() << "\ntrainer:\n" << trainer.output());
    CHECK(contains(trainer.output(), "a parameter changed shape from [2, 4] to [3, 4] after it was declared"));
    // The trainer's process ended without a word to the site: counted as a disconnection.
    CHECK(site.wait_exit() != 0);
    CHECK(contains(site.log(), "trainer refused (disconnected): closed the channel before the run's end"));
  }
}
