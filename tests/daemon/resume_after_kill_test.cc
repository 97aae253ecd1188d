// Resuming after SIGKILL, for every algorithm but dts (site_daemon_test.cc restarts a dts site), dsync
// on a network with batch norm: three real `meridian start` processes on 127.0.0.1, one of them killed
// with SIGKILL mid-run and started again at once on the same run directory, as an operator's
// supervisor would. The returning site must resume from its newest checkpoint (not from round 0),
// rejoin its peers, and every site must end at the run's last round with a model as good as a run
// without the fault gives. diloco_resume_test.cc keeps a diloco site away until the others have gone on
// without it, and checks diloco's outer state after the rejoin.
// scripts/daemon-acceptance --kill does the same with four sites and whole epochs, outside the suite.
#include <catch2/catch.hpp>

#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

#include "daemon/checkpoint/checkpoint.h"
#include "daemon/checkpoint/checkpoint_model.h"
#include "models/data/idx_reader.h"
#include "tests/daemon/site_process.h"
#include "tests/support/fashion_mnist.h"
#include "tests/support/file_contents.h"
#include "tests/support/start_args.h"
#include "tests/support/temp_dir.h"

namespace fs = std::filesystem;
using meridian::tests::eventually_from_process;
using meridian::tests::SiteProcess;
using meridian::tests::TempDir;
using meridian::tests::StartArgs;

namespace {

const std::string kFashionMnist = meridian::tests::fashion_mnist_dir().string();

// Site `index` of three, for 3 epochs (936 rounds: room for the victim to come back before the end on a
// fast machine), with a checkpoint every half second so that the victim has one to come back
// to. A round that a live but slow site misses is abandoned, and the survivors wait for a view without
// it that never comes: on a loaded machine only the killed site may miss one. So the heartbeat timeout
// docs/operations.md gives for a loaded 2-core machine, and a round deadline of twice that; the
// survivors still give up the victim's round at once, when its new incarnation says hello.
StartArgs site_args(int index, const std::string& algo) {
  auto args = StartArgs("s" + std::to_string(index))
                  .site(index, 3)
                  .set("--algo", algo)
                  .set("--epochs", 3)
                  .set("--eval-every", 1000000)
                  .set("--seed", 7)
                  .set("--lr", "0.05")
                  .set("--optimizer", "momentum")
                  .set("--heartbeat-timeout", 15)
                  .set("--round-timeout", 30)
                  .set("--checkpoint-interval", "0.5");
  // dsync runs a network with batch norm: its running statistics go through the checkpoint, the resume
  // and the rejoin's re-average with the parameters.
  if (algo == "dsync") args.set("--model", "mlp-bn").set("--widths", 32);
  return args;
}

nlohmann::json result_of(const SiteProcess& site) {
  return nlohmann::json::parse(meridian::tests::file_contents(site.run_dir() / "result.json"));
}

// The first number after `prefix` in `log`, or -1 when the log has no such line.
long long number_after(const std::string& log, const std::string& prefix) {
  std::smatch m;
  if (!std::regex_search(log, m, std::regex(prefix + " ([0-9]+)"))) return -1;
  return std::stoll(m[1]);
}

}  // namespace

TEST_CASE("a SIGKILLed site of allreduce, sgp, dsync or diloco resumes from its checkpoint and the federation finishes",
          "[process][daemon][fault][resume]") {
  MERIDIAN_SKIP_WITHOUT_FASHION_MNIST();
  const std::string algo = GENERATE(as<std::string>{}, "allreduce", "sgp", "dsync", "diloco");
  DYNAMIC_SECTION(algo) {
    TempDir dir;
    std::vector<std::unique_ptr<SiteProcess>> sites;
    for (int i = 0; i < 3; ++i) {
      auto args = site_args(i, algo);
      if (i > 0) args.join(sites[0]->endpoint());
      sites.push_back(std::make_unique<SiteProcess>(dir.path() / ("s" + std::to_string(i)), args));
    }
    auto& victim = sites[2];
    // Mid-run: it has checkpointed at least twice, so it trained past its first checkpoint.
    REQUIRE(eventually_from_process([&] { return victim->checkpoints().size() >= 2 || victim->exited(); }));
    INFO(victim->log());
    REQUIRE_FALSE(victim->exited());
    victim->kill_hard();
    const auto checkpoint_before = victim->checkpoints().back();
    const auto killed_at = meridian::daemon::read_checkpoint_file(checkpoint_before);
    REQUIRE(killed_at.step > 0);

    const auto old_log = victim->log();
    sites[2] = std::make_unique<SiteProcess>(victim->run_dir(), site_args(2, algo).join(sites[0]->endpoint()));
    // Every site's exit first, then the checks: a failure then shows all three logs, not only the first.
    std::vector<int> codes;
    for (auto& s : sites) codes.push_back(s->wait_exit(std::chrono::seconds(600)));
    for (std::size_t i = 0; i < sites.size(); ++i) {
      INFO(sites[i]->run_dir() << ":\n" << sites[i]->log());
      CHECK(codes[i] == 0);
      CHECK(sites[i]->has_result());
    }
    for (const int code : codes) REQUIRE(code == 0);

    // The new process took up the old one's checkpoint and rounds, not a fresh start.
    const auto log = sites[2]->log().substr(old_log.size());
    INFO("restarted s2:\n" << log);
    CHECK(log.find("resuming from " + checkpoint_before.string() + " (round " + std::to_string(killed_at.step)) !=
          std::string::npos);
    const long long rejoined = number_after(log, "rejoining at round");
    CHECK(rejoined >= static_cast<long long>(killed_at.step));

    // Everybody ends at the run's last round, the returning site included, and it trained on after
    // it came back.
    std::vector<fs::path> files;
    for (const auto& s : sites) files.push_back(result_of(*s)["final_checkpoint"].get<std::string>());
    const auto reference = meridian::daemon::read_checkpoint_file(files[0]);
    CHECK(reference.step == killed_at.end_round);
    CHECK(static_cast<long long>(reference.step) > rejoined);
    for (std::size_t i = 1; i < files.size(); ++i) {
      const auto other = meridian::daemon::read_checkpoint_file(files[i]);
      CHECK(other.step == reference.step);
      CHECK(other.algorithm == algo);
      CHECK(other.model_state.size() == reference.model_state.size());
    }
    if (algo == "dsync") CHECK_FALSE(killed_at.model_state.empty());
    static const auto test_set = meridian::models::data::load_fashion_mnist(kFashionMnist, false);
    const double accuracy = meridian::daemon::evaluate_checkpoints(files, test_set).evaluation.accuracy;
    INFO(algo << " accuracy of the averaged final models " << accuracy);
    CHECK(accuracy > 0.75);
  }
}
