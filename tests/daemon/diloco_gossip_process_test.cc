// diloco-gossip with real `meridian start` processes on 127.0.0.1: a SIGKILLed site does not stop the
// others, which finish the run on push-sum alone (nobody waits for every site, nothing is redone).
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "daemon/checkpoint/checkpoint.h"
#include "tests/daemon/federation_process_support.h"
#include "tests/daemon/site_process.h"
#include "tests/support/temp_dir.h"

using meridian::tests::eventually_from_process;
using meridian::tests::SiteProcess;
using meridian::tests::TempDir;

namespace {

// Site `index` of 3 running diloco-gossip on the small table for a fixed number of epochs.
meridian::tests::StartArgs gossip_site_args(int index, const std::filesystem::path& table) {
  return meridian::tests::training_site_args("s" + std::to_string(index), index, 3, table)
      .set("--algo", "diloco-gossip")
      .set("--epochs", 1500)  // 4 steps an epoch or a little more: 6000 steps or more, to die in the middle of
      .set("--eval-every", 100000)
      .set("--metrics-address", "off")
      .set("--inner-steps", 4)
      .set("--overlap", 1)
      .set("--checkpoint-interval", "0.5");
}

}  // namespace

TEST_CASE("a SIGKILLed diloco-gossip site does not stop the others: they finish the run without it",
          "[daemon][process][fault][diloco-gossip]") {
  TempDir dir;
  const auto table = meridian::tests::write_small_table(dir.path() / "data");
  std::vector<std::unique_ptr<SiteProcess>> sites;
  for (int i = 0; i < 3; ++i) {
    auto args = gossip_site_args(i, table);
    if (i > 0) args.join(sites[0]->endpoint());
    sites.push_back(std::make_unique<SiteProcess>(dir.path() / ("s" + std::to_string(i)), args));
  }
  auto& victim = sites[2];
  // Mid-run: it has trained and written a checkpoint, and the run is far from its end.
  REQUIRE(eventually_from_process([&] { return !victim->checkpoints().empty() || victim->exited(); }));
  REQUIRE_FALSE(victim->exited());
  victim->kill_hard();
  std::vector<int> codes;
  for (int i = 0; i < 2; ++i) codes.push_back(sites[i]->wait_exit(std::chrono::seconds(600)));  // a hang guard only
  for (int i = 0; i < 2; ++i) {
    INFO(sites[i]->run_dir() << ":\n" << sites[i]->log());
    CHECK(codes[i] == 0);
    REQUIRE(sites[i]->has_result());
  }
  // Both survivors reached the run's last step; the victim had not.
  const auto last = [](const SiteProcess& s) {
    std::uint64_t step = 0;
    for (const auto& file : s.checkpoints()) step = std::max(step, meridian::daemon::read_checkpoint_file(file).step);
    return step;
  };
  CHECK(last(*sites[0]) >= 6000);
  CHECK(last(*sites[1]) == last(*sites[0]));
  CHECK(last(*victim) < last(*sites[0]));
}
