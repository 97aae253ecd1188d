// When a federation's automatic shape comes into force, through real `meridian start` processes on
// 127.0.0.1 with emulated WAN links: diloco's overlap τ (automatic by default) runs on a measured pace
// from the first round every site trains, the same τ from the same view at every site, because the
// sites time a few steps before training and wait for the view that carries the measured pace
// (peer/membership.h). A federation with a fixed τ waits for no pace and times no step.
#include <catch2/catch.hpp>

#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "tests/daemon/federation_process_support.h"
#include "tests/daemon/site_process.h"
#include "tests/support/temp_dir.h"

using meridian::tests::SiteProcess;
using meridian::tests::TempDir;
using meridian::tests::StartArgs;

namespace {

// Site `index` of 3 running diloco (H = 4) on the small table for 25 epochs (about 100 steps), over
// links with 20 ms of latency each way. The heartbeat timeout is far above any stall of a loaded
// machine: nobody is declared dead.
StartArgs diloco_site_args(int index, const std::filesystem::path& table) {
  return meridian::tests::training_site_args("s" + std::to_string(index), index, 3, table)
      .set("--algo", "diloco")
      .set("--period", 4)
      .set("--epochs", 25)
      .set("--eval-every", 100000)
      .set("--metrics-address", "off")
      .set("--wan", "latency=20ms")
      .set("--heartbeat-timeout", 15)
      .set("--round-timeout", 30);
}

// Starts three sites with `args` and waits for every one to exit; REQUIREs that they all finished.
std::vector<std::string> run_federation(const std::filesystem::path& dir, const std::filesystem::path& table,
                                        StartArgs (*args)(int, const std::filesystem::path&)) {
  std::vector<std::unique_ptr<SiteProcess>> sites;
  for (int i = 0; i < 3; ++i) {
    auto a = args(i, table);
    if (i > 0) a.join(sites[0]->endpoint());
    sites.push_back(std::make_unique<SiteProcess>(dir / ("s" + std::to_string(i)), a));
  }
  std::vector<int> codes;
  for (auto& s : sites) codes.push_back(s->wait_exit(std::chrono::seconds(600)));  // a hang guard only
  std::vector<std::string> logs;
  for (std::size_t i = 0; i < sites.size(); ++i) {
    logs.push_back(sites[i]->log());
    INFO(sites[i]->run_dir() << ":\n" << logs.back());
    CHECK(codes[i] == 0);
    REQUIRE(sites[i]->has_result());
  }
  return logs;
}

struct Start {
  unsigned long long view = 0;
  unsigned long long round = 0;
};

// The view a site started on and its round, from "view V from round R: s0, s1, s2 (3 sites)".
std::optional<Start> start_of(const std::string& log) {
  std::smatch m;
  if (!std::regex_search(log, m, std::regex("view ([0-9]+) from round ([0-9]+): s0, s1, s2 \\(3 sites\\)")))
    return std::nullopt;
  return Start{std::stoull(m[1]), std::stoull(m[2])};
}

}  // namespace

TEST_CASE("diloco sites on emulated WAN links run the automatic overlap on a measured pace from their first round",
          "[process][daemon][auto_shape][diloco]") {
  TempDir dir;
  const auto table = meridian::tests::write_small_table(dir.path() / "data");
  const auto logs = run_federation(dir.path(), table, diloco_site_args);

  std::optional<std::string> first_shape;
  for (const auto& log : logs) {
    INFO(log);
    CHECK(log.find("step time before training: ") != std::string::npos);
    const auto start = start_of(log);
    REQUIRE(start);
    // The first shape line is the first round's, and its pace is measured (not "not measured yet").
    std::smatch m;
    REQUIRE(std::regex_search(log, m,
                              std::regex("round ([0-9]+): diloco runs (overlap τ = [0-9]+ over the direct exchange) "
                                         "\\(automatic, from view "
                                         "([0-9]+): ([^)]*)\\)")));
    CHECK(std::stoull(m[1]) == start->round);
    CHECK(std::stoull(m[3]) == start->view);
    CHECK(m[4].str().rfind("round trip ", 0) == 0);
    // Every site runs the same τ from the same view and pace.
    const std::string shape = m[2].str() + " from view " + m[3].str() + ": " + m[4].str();
    if (!first_shape) first_shape = shape;
    CHECK(shape == *first_shape);
  }
}

TEST_CASE("diloco sites with a fixed overlap time no steps and wait for no pace",
          "[process][daemon][auto_shape][diloco]") {
  TempDir dir;
  const auto table = meridian::tests::write_small_table(dir.path() / "data");
  const auto logs = run_federation(dir.path(), table, [](int index, const std::filesystem::path& t) {
    return diloco_site_args(index, t).set("--overlap", 1);
  });
  for (const auto& log : logs) {
    INFO(log);
    CHECK(start_of(log));
    CHECK(log.find("step time before training") == std::string::npos);
    CHECK(log.find("carries no measured pace") == std::string::npos);
    CHECK(log.find("(automatic, from view") == std::string::npos);
  }
}
