// The membership protocol at scale, simulated (peer/membership_simulation.h): the real state machine
// of every site over a simulated WAN on a virtual clock. For each number of sites and each loss rate it
// runs a join wave of all sites at once, a steady window, and a crash of 1% of the sites, and prints
// one markdown row: join time and views, per-site bytes per second, detection time, time until every
// live site holds the new view, false deaths, and the driver's CPU per site. A second table gives the
// steady traffic computed from the real encodings for sizes too large to simulate.
//
// Usage: membership_simulation [--sites 16,100] [--loss 0,0.01] [--loss-kind retransmit|drop]
//        [--computed-sites 1000,10000] [--start-spread-ms 100] [--steady-s 10] [--after-crash-s 20]
//        [--seed 1] ...
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include "peer/membership_simulation.h"
#include "peer/wan_model.h"

namespace {

using meridian::peer::MembershipSimulationOptions;
using meridian::peer::MembershipSimulationReport;

std::string secs(const std::optional<std::chrono::microseconds>& t) {
  if (!t) return "—";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", static_cast<double>(t->count()) / 1e6);
  return buf;
}

std::string kib(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", bytes / 1024);
  return buf;
}

double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

long peak_rss_mib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss / 1024;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Simulates Meridian's membership protocol (the real state machine of every site) at scale."};
  std::vector<std::size_t> sites{16, 100};
  std::vector<double> losses{0, 0.01};
  std::vector<std::size_t> computed{1000, 10000};
  std::string loss_kind = "retransmit", wan = "world4";
  MembershipSimulationOptions o;
  long interval_ms = o.heartbeat_interval.count(), timeout_ms = o.heartbeat_timeout.count();
  long spread_ms = o.start_spread.count();
  long steady_s = o.steady.count(), after_crash_s = o.after_crash.count(), join_limit_s = o.join_limit.count();
  app.add_option("--sites", sites, "numbers of sites to simulate")->delimiter(',');
  app.add_option("--loss", losses, "message loss rates, each in [0, 1)")->delimiter(',');
  app.add_option("--loss-kind", loss_kind, "retransmit (TCP: a lost message comes an RTO later) or drop")
      ->check(CLI::IsMember({"retransmit", "drop"}));
  app.add_option("--computed-sites", computed, "sizes whose steady traffic is computed, not simulated")->delimiter(',');
  app.add_option("--wan", wan, "latency model (peer/wan_model.h): world4 or a link spec");
  app.add_option("--seed", o.seed, "seed of the network, the start times and the crash");
  app.add_option("--bootstraps", o.bootstraps, "every site greets the first N sites");
  app.add_option("--heartbeat-interval-ms", interval_ms, "heartbeat interval");
  app.add_option("--heartbeat-timeout-ms", timeout_ms, "heartbeat timeout");
  app.add_option("--start-spread-ms", spread_ms, "sites start uniformly within this span");
  app.add_option("--join-limit-s", join_limit_s, "simulated seconds the join wave may take");
  app.add_option("--steady-s", steady_s, "simulated seconds of the steady window");
  app.add_option("--after-crash-s", after_crash_s, "simulated seconds after the crash");
  app.add_option("--crash-fraction", o.crash_fraction, "fraction of the sites that crash (at least one)");
  CLI11_PARSE(app, argc, argv);
  spdlog::set_level(spdlog::level::warn);  // every site logs each join and death
  o.wan = meridian::peer::parse_wan_spec(wan);
  o.loss_kind = loss_kind == "drop" ? meridian::peer::SimulatedLoss::kDrop : meridian::peer::SimulatedLoss::kRetransmit;
  o.heartbeat_interval = std::chrono::milliseconds(interval_ms);
  o.heartbeat_timeout = std::chrono::milliseconds(timeout_ms);
  o.start_spread = std::chrono::milliseconds(spread_ms);
  o.join_limit = std::chrono::seconds(join_limit_s);
  o.steady = std::chrono::seconds(steady_s);
  o.after_crash = std::chrono::seconds(after_crash_s);

  std::printf("| sites | loss | join s | join views | KiB/s per site (max) | of which heartbeats | member list KiB | "
              "detect s (first/mean/last) | new view everywhere s | crash views | false deaths | refutations | "
              "driver CPU ms/s per site | CPU s | wall s | peak RSS MiB |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  std::fflush(stdout);
  for (std::size_t n : sites) {
    for (double loss : losses) {
      o.sites = n;
      o.loss = loss;
      const auto started = std::chrono::steady_clock::now();
      const double cpu_before = cpu_seconds();
      const MembershipSimulationReport r = meridian::peer::simulate_membership(o);
      const double cpu_s = cpu_seconds() - cpu_before;
      const double run_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
      std::printf("| %zu | %g%% | %s | %llu | %s (%s) | %s | %s | %s / %s / %s | %s | %llu | %zu | %zu | %.2f | %.0f | %.0f | %ld |\n",
                  n, loss * 100, secs(r.join_time).c_str(), static_cast<unsigned long long>(r.join_view_id),
                  kib(r.bytes_per_s_mean).c_str(), kib(r.bytes_per_s_max).c_str(),
                  kib(r.heartbeat_bytes_per_s_mean).c_str(), kib(static_cast<double>(r.largest_member_list_bytes)).c_str(),
                  secs(r.detect_first).c_str(), secs(r.detect_mean).c_str(), secs(r.detect_last).c_str(),
                  secs(r.new_view_everywhere).c_str(), static_cast<unsigned long long>(r.crash_view_id), r.false_deaths,
                  r.refutations, r.driver_cpu_share_mean * 1000, cpu_s, run_s, peak_rss_mib());
      if (r.detections_missing > 0) std::printf("<!-- %zu (live, crashed) pairs never declared dead -->\n", r.detections_missing);
      std::fflush(stdout);
    }
  }

  std::printf("\n| sites | heartbeat B | member list KiB (1 view / 8 views) | KiB/s per site (1 view / 8 views) |\n");
  std::printf("|---|---|---|---|\n");
  std::vector<std::size_t> all = sites;
  all.insert(all.end(), computed.begin(), computed.end());
  for (std::size_t n : all) {
    if (n < 2) continue;  // an empty list ("") reads as 0
    const auto one = meridian::peer::steady_membership_traffic(n, 1, o);
    const auto eight = meridian::peer::steady_membership_traffic(n, 8, o);
    std::printf("| %zu | %zu | %s / %s | %s / %s |\n", n, one.heartbeat_bytes,
                kib(static_cast<double>(one.member_list_bytes)).c_str(),
                kib(static_cast<double>(eight.member_list_bytes)).c_str(), kib(one.bytes_per_s).c_str(),
                kib(eight.bytes_per_s).c_str());
  }
  return 0;
}
