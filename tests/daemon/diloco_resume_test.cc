// diloco resuming from its checkpoints, through real `meridian start` processes on 127.0.0.1.
//
// A lone site on an int8 wire, stopped mid-run and started again on its run directory: it restores the
// error-feedback residuals its checkpoint holds, starts them at zero from a checkpoint without them
// (saying so), and refuses one whose residuals do not fit the model, leaving its checkpoints as they were.
//
// A site killed with SIGKILL in a federation of three: the other two notice the death, take a view
// without it and go on training (a dead site does not stop them); only then is the victim started
// again on its run directory, as an operator's supervisor would. It resumes from its newest checkpoint,
// residuals included, and rejoins; the re-average that takes it back gives every site the same global
// parameters θ_g and outer momentum m, which the later syncs keep identical, so that every site's final
// checkpoint holds the same bits of both. resume_after_kill_test.cc restarts a killed diloco site at
// once, before its peers notice.
#include <catch2/catch.hpp>

#include <signal.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "daemon/checkpoint/checkpoint.h"
#include "daemon/checkpoint/checkpoint_store.h"
#include "daemon/control/control_client.h"
#include "error/exit_code.h"
#include "tests/daemon/federation_process_support.h"
#include "tests/daemon/site_process.h"
#include "tests/support/file_contents.h"
#include "tests/support/start_args.h"
#include "tests/support/temp_dir.h"

namespace fs = std::filesystem;
using meridian::daemon::Checkpoint;
using meridian::daemon::read_checkpoint_file;
using meridian::tests::SiteProcess;
using meridian::tests::TempDir;
using meridian::tests::StartArgs;

namespace {

// Hang guards only: every wait below ends as soon as what it waits for happens.
constexpr std::chrono::seconds kGuard(600);
constexpr int kInnerSteps = 4;

bool eventually(const std::function<bool()>& condition) {
  return meridian::tests::eventually_from_process(condition, kGuard);
}

// Site `index` of three on the small table (4 steps per epoch with batch 8): diloco with H = 4, two
// fragments synced two steps apart, overlap τ = 1, int8 pseudo-gradients. The emulated 20 ms links make
// every sync, one every two steps, cost at least one crossing, so that 2500 steps take at least 25 s of
// training however fast the machine is. The survivors stall for the heartbeat timeout when the victim
// dies, a few dozen steps in; the rest of the run, at least 24 s, is the victim's time to come back,
// which takes a second or two.
// The heartbeat timeout docs/operations.md gives for a loaded 2-core machine, and a round deadline of
// twice that, so that only the killed site is ever taken for dead.
StartArgs site_args(int index, const fs::path& table) {
  return StartArgs("s" + std::to_string(index))
      .site(index, 3)
      .csv(table)
      .mlp(8)
      .set("--batch", 8)
      .set("--epochs", 625)
      .set("--eval-every", 1000000)
      .set("--seed", 3)
      .set("--algo", "diloco")
      .set("--optimizer", "adamw")
      .set("--lr", "0.01")
      .set("--inner-steps", kInnerSteps)
      .set("--overlap", 1)
      .set("--fragments", 2)
      .set("--compression", "int8")
      .set("--wan", "latency=20ms")
      .set("--heartbeat-timeout", 15)
      .set("--round-timeout", 30)
      .set("--checkpoint-interval", "0.5");
}

// The newest checkpoint of `site` if it has at least two and the newest is past `step` (nullopt while a
// rotation removes the file being read).
std::optional<Checkpoint> newest_past(const SiteProcess& site, std::uint64_t step) {
  const auto files = site.checkpoints();
  if (files.size() < 2) return std::nullopt;
  try {
    auto cp = read_checkpoint_file(files.back());
    if (cp.step > step) return cp;
  } catch (const meridian::daemon::CheckpointError&) {
  }
  return std::nullopt;
}

// The round at which `log` says a view of exactly `members` came in force, or -1.
long long round_of_view(const std::string& log, const std::string& members, int count) {
  std::smatch m;
  const std::regex line("round ([0-9]+): view [0-9]+ in force: " + members + " \\(" + std::to_string(count) +
                        " sites\\)");
  return std::regex_search(log, m, line) ? std::stoll(m[1]) : -1;
}

std::uint64_t step_of(const SiteProcess& site) {
  try {
    return meridian::daemon::ControlClient((site.run_dir() / "control.sock").string()).status().step;
  } catch (const std::exception&) {
    return 0;  // the site is between two states, or gone (its log then says why)
  }
}

const std::vector<float>& section(const Checkpoint& cp, const std::string& name) {
  const auto* values = cp.find_optimizer_state(name);
  REQUIRE(values != nullptr);
  return *values;
}

}  // namespace

TEST_CASE("a diloco site resumes with its checkpoint's residuals, at zero without them, and refuses misfits",
          "[process][daemon][checkpoint][diloco]") {
  TempDir dir;
  const auto table = meridian::tests::write_small_table(dir.path());
  // One site that trains until stopped (a million steps), then resumes on the same run directory. Alone,
  // it has no peer to misjudge: short heartbeat and round timeouts only shorten the wait of a resumed
  // site for peers that might still be there.
  const auto solo = StartArgs("solo")
                        .csv(table)
                        .mlp(8)
                        .set("--batch", 8)
                        .set("--epochs", 100000)
                        .set("--eval-every", 1000000)
                        .set("--seed", 3)
                        .set("--algo", "diloco")
                        .set("--inner-steps", kInnerSteps)
                        .set("--overlap", 1)
                        .set("--compression", "int8")
                        .set("--checkpoint-interval", "0.2")
                        .set("--heartbeat-interval", "0.2")
                        .set("--heartbeat-timeout", 1)
                        .set("--round-timeout", 1);
  const fs::path run = dir.path() / "solo";
  // Newest first.
  const auto checkpoint_files = [&] { return meridian::daemon::CheckpointStore(run / "checkpoints", 1).list(); };
  // Whether the newest checkpoint is past `step` (false while a rotation removes the file being read).
  const auto checkpointed_past = [&](std::uint64_t step) {
    const auto files = checkpoint_files();
    try {
      return !files.empty() && read_checkpoint_file(files.front()).step > step;
    } catch (const meridian::daemon::CheckpointError&) {
      return false;
    }
  };
  // Runs the site until it has checkpointed past `step`, then stops it (SIGTERM: a final checkpoint);
  // the exit code and what it logged.
  const auto run_past = [&](std::uint64_t step) {
    const auto before = fs::exists(run / "log") ? meridian::tests::file_contents(run / "log").size() : 0;
    SiteProcess site(run, solo);
    if (eventually([&] { return checkpointed_past(step) || site.exited(); }) && !site.exited()) site.signal(SIGTERM);
    const int code = site.wait_exit(kGuard);
    return std::pair{code, site.log().substr(before)};
  };
  {
    const auto [code, log] = run_past(4 * kInnerSteps);
    INFO(log);
    REQUIRE(code == 0);
  }
  const auto file = checkpoint_files().front();
  auto cp = read_checkpoint_file(file);
  const std::size_t n = cp.parameters.size();
  const auto* residuals = cp.find_optimizer_state("diloco-residuals");
  REQUIRE(residuals != nullptr);
  REQUIRE(residuals->size() == n);
  CHECK(std::any_of(residuals->begin(), residuals->end(), [](float r) { return r != 0.0f; }));

  SECTION("restored") {
    const auto [code, log] = run_past(cp.step);
    INFO(log);
    CHECK(code == 0);
    CHECK(log.find("resuming from " + file.string()) != std::string::npos);
    CHECK(log.find("diloco: restored the error-feedback residuals of the int8 wire from the checkpoint") !=
          std::string::npos);
  }
  SECTION("a checkpoint without them resumes with them at zero, and says so") {
    std::erase_if(cp.optimizer_state, [](const auto& state) { return state.name == "diloco-residuals"; });
    REQUIRE_FALSE(meridian::daemon::write_checkpoint_file(file, cp.view()));
    const auto [code, log] = run_past(cp.step);
    INFO(log);
    CHECK(code == 0);
    CHECK(log.find("resuming from " + file.string()) != std::string::npos);
    CHECK(log.find("diloco: the checkpoint holds no error-feedback residuals (written before checkpoints kept "
                   "them, or by a run with an fp32 wire): they start at zero") != std::string::npos);
    // The checkpoints it writes hold them again.
    const auto later = read_checkpoint_file(checkpoint_files().front());
    CHECK(later.step > cp.step);
    REQUIRE(later.find_optimizer_state("diloco-residuals") != nullptr);
    CHECK(later.find_optimizer_state("diloco-residuals")->size() == n);
  }
  SECTION("residuals of another length are refused, and the checkpoints are left as they were") {
    for (auto& state : cp.optimizer_state)
      if (state.name == "diloco-residuals") state.values.push_back(0.5f);
    REQUIRE_FALSE(meridian::daemon::write_checkpoint_file(file, cp.view()));
    const auto bytes = meridian::tests::file_contents(file);
    const auto files = checkpoint_files();
    const auto [code, log] = run_past(cp.step);
    INFO(log);
    CHECK(code == meridian::error::kExitUser);
    CHECK(log.find("checkpoint section 'diloco-residuals' (diloco's error-feedback residuals) holds " +
                   std::to_string(n + 1) + " values, this model needs " + std::to_string(n)) != std::string::npos);
    CHECK(checkpoint_files() == files);
    CHECK(meridian::tests::file_contents(file) == bytes);
  }
}

TEST_CASE("a SIGKILLed diloco site: the others train on, it rejoins from its checkpoint, all end with one θ_g and m",
          "[process][daemon][fault][diloco]") {
  TempDir dir;
  const auto table = meridian::tests::write_small_table(dir.path());
  std::vector<std::unique_ptr<SiteProcess>> sites;
  for (int i = 0; i < 3; ++i) {
    auto args = site_args(i, table);
    if (i > 0) args.join(sites[0]->endpoint());
    sites.push_back(std::make_unique<SiteProcess>(dir.path() / ("s" + std::to_string(i)), args));
  }
  auto& victim = sites[2];
  auto logs = [&] {
    std::string all;
    for (const auto& s : sites) all += s->run_dir().string() + ":\n" + s->log() + "\n";
    return all;
  };

  // Mid-run, with some syncs behind it, so that its checkpoint holds what int8 rounding held back.
  std::optional<Checkpoint> checkpoint;
  REQUIRE(eventually([&] { return (checkpoint = newest_past(*victim, 4 * kInnerSteps)) || victim->exited(); }));
  INFO(logs());
  REQUIRE_FALSE(victim->exited());
  victim->kill_hard();
  const auto checkpoint_file = victim->checkpoints().back();
  const auto killed_at = read_checkpoint_file(checkpoint_file);
  REQUIRE(killed_at.step < killed_at.end_round);
  const auto& residuals = section(killed_at, "diloco-residuals");
  CHECK(residuals.size() == killed_at.parameters.size());
  CHECK(std::any_of(residuals.begin(), residuals.end(), [](float r) { return r != 0.0f; }));

  // The survivors take a view without the victim and sync on in it: two full periods past its start.
  long long without = -1;
  REQUIRE(eventually([&] {
    without = round_of_view(sites[0]->log(), "s0, s1", 2);
    return without >= 0 || sites[0]->exited();
  }));
  REQUIRE(eventually([&] {
    for (int i = 0; i < 2; ++i)
      if (step_of(*sites[i]) < static_cast<std::uint64_t>(without) + 2 * kInnerSteps && !sites[i]->exited())
        return false;
    return true;
  }));
  for (int i = 0; i < 2; ++i) REQUIRE_FALSE(sites[i]->exited());

  const auto old_log = victim->log();
  sites[2] = std::make_unique<SiteProcess>(victim->run_dir(), site_args(2, table).join(sites[0]->endpoint()));
  // Every site's exit first, then the checks: a failure then shows all three logs.
  std::vector<int> codes;
  for (auto& s : sites) codes.push_back(s->wait_exit(kGuard));
  for (std::size_t i = 0; i < sites.size(); ++i) {
    CHECK(codes[i] == 0);
    CHECK(sites[i]->has_result());
  }
  for (const int code : codes) REQUIRE(code == 0);

  // The new process took up the old one's checkpoint, residuals included, and came back in a view of
  // all three that the survivors took after the one without it.
  const auto log = sites[2]->log().substr(old_log.size());
  CHECK(log.find("resuming from " + checkpoint_file.string()) != std::string::npos);
  CHECK(log.find("diloco: restored the error-feedback residuals of the int8 wire from the checkpoint") !=
        std::string::npos);
  CHECK(log.find("rejoining at round") != std::string::npos);
  const auto survivor_log = sites[0]->log();
  const auto after = survivor_log.find("in force: s0, s1 (2 sites)");
  REQUIRE(after != std::string::npos);
  CHECK(round_of_view(survivor_log.substr(after), "s0, s1, s2", 3) > without);

  // Everybody ends at the run's last round with the same θ_g and m, bit for bit, which moved on since
  // the victim's checkpoint.
  std::vector<Checkpoint> finals;
  for (const auto& s : sites) {
    const auto result = nlohmann::json::parse(meridian::tests::file_contents(s->run_dir() / "result.json"));
    finals.push_back(read_checkpoint_file(result["final_checkpoint"].get<std::string>()));
  }
  for (std::size_t i = 0; i < finals.size(); ++i) {
    INFO("s" << i);
    CHECK(finals[i].step == killed_at.end_round);
    CHECK(section(finals[i], "diloco-global") == section(finals[0], "diloco-global"));
    CHECK(section(finals[i], "diloco-outer-momentum") == section(finals[0], "diloco-outer-momentum"));
  }
  CHECK(section(finals[2], "diloco-global") != section(killed_at, "diloco-global"));
}
