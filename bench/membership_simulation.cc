// The membership protocol at scale, simulated (peer/membership_simulation.h): the real state machine
// of every site over a simulated WAN on a virtual clock. For each number of sites and each loss rate it
// runs a join wave of all sites at once, a steady window, and a crash of 1% of the sites, and prints
// one markdown row: join time and views, per-site bytes per second, detection time, time until every
// live site holds the new view, false deaths, and the driver's CPU per site. A second table gives the
// steady traffic computed from the real encodings for sizes too large to simulate, and a third (with
// --probe-sites) the CPU one real site spends in a steady federation of each size, its peers' messages
// fed to it directly.
//
// Usage: membership_simulation [--sites 16,100] [--loss 0,0.01] [--loss-kind retransmit|drop]
//        [--computed-sites 1000,10000] [--start-spread-ms 100] [--steady-s 10] [--after-crash-s 20]
//        [--seed 1] ...
#include <sys/resource.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include "peer/membership_driver.h"
#include "peer/membership_simulation.h"
#include "peer/wire_codec.h"
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

// One real site (driver and state machine) in a steady federation of n sites, its peers' messages fed
// to it directly: what simulating every site cannot reach. The port only counts what the site sends.
class CountingPort final : public meridian::peer::MembershipPort {
 public:
  void send_membership(const std::string&, meridian::peer::MessageKind, std::string body, Clock::time_point) override {
    bytes += body.size();
  }
  void member_restarted(const std::string&) override {}
  void member_joined(const std::string&) override {}
  void member_gone(const std::string&, bool) override {}
  void adopt_bootstraps() override {}
  void greet_bootstraps(const std::string&, Clock::time_point) override {}
  void membership_changed() override {}
  std::uint64_t bytes = 0;
};

struct ProbeCosts {
  double heartbeat_us = 0;    // one received heartbeat, decoded and taken
  double member_list_us = 0;  // one received member list of the whole federation
  double tick_us = 0;         // one heartbeat tick with nothing changed: n - 1 heartbeats and a table encoded
  double setup_s = 0;         // building the federation around the site
};

ProbeCosts probe(std::size_t n, const MembershipSimulationOptions& o) {
  using namespace meridian::peer;
  using Clock = MembershipDriver::Clock;
  // This thread's CPU time, so that waiting for a core on a shared machine does not count.
  auto cpu_us = [] {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) * 1e6 + static_cast<double>(ts.tv_nsec) / 1e3;
  };
  auto name = [](std::size_t i) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "site-%05zu", i);
    return std::string(buf);
  };
  auto address = [](std::size_t i) {
    return "tcp://10." + std::to_string(i / 65536 % 256) + "." + std::to_string(i / 256 % 256) + "." +
           std::to_string(i % 256) + ":7000";
  };
  constexpr std::uint64_t kIncarnation = 1'790'000'000'000ull;
  const double setup = cpu_us();
  Clock::time_point t(std::chrono::hours(24));
  CountingPort port;
  MembershipDriver site(MembershipConfig{name(0), address(0), "oregon", kIncarnation, o.heartbeat_timeout, 8, {}, {}, false},
                        MembershipTiming{o.heartbeat_interval, o.heartbeat_timeout, nullptr}, port, t);
  site.on_timer(t);
  for (std::size_t i = 1; i < n; ++i)
    site.on_hello(HelloInfo{name(i), address(i), o.wan.region_name(o.wan.region_of_site(i)), kIncarnation + i, 0, {}, {}}, t);
  t += o.heartbeat_interval;
  site.on_timer(t);  // proposes the view of all n sites and gossips it
  // The members hold that view: their member lists say so. From 200 of them at most: each list held
  // costs the site n names (at 10,000 sites, all of them would take it 3 GB), and the costs measured
  // below do not depend on how many it holds.
  MemberListInfo list = site.membership().snapshot();
  const std::string table = encode_members(list);
  for (std::size_t i = 1; i < std::min<std::size_t>(n, 201); ++i) site.on_message(name(i), MessageKind::kMembers, table, t);
  ProbeCosts c;
  c.setup_s = (cpu_us() - setup) / 1e6;

  // Heartbeats from up to 2,000 members, encoded beforehand: the cost of taking one.
  t += o.heartbeat_interval / 2;
  const std::size_t sample = std::min<std::size_t>(n - 1, 2000);
  std::vector<std::string> beats;
  for (std::size_t i = 1; i <= sample; ++i)
    beats.push_back(encode_heartbeat(HeartbeatInfo{kIncarnation + i, 0, 86'400'000'000ull, 0, 0, 180'000, 0}));
  double start = cpu_us();
  for (std::size_t i = 1; i <= sample; ++i) site.on_message(name(i), MessageKind::kHeartbeat, beats[i - 1], t);
  c.heartbeat_us = (cpu_us() - start) / static_cast<double>(sample);
  start = cpu_us();
  constexpr int kLists = 5;
  for (int k = 1; k <= kLists; ++k) site.on_message(name(k), MessageKind::kMembers, table, t);
  c.member_list_us = (cpu_us() - start) / kLists;
  t += o.heartbeat_interval;
  start = cpu_us();
  site.on_timer(t);
  c.tick_us = (cpu_us() - start);
  return c;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Simulates Meridian's membership protocol (the real state machine of every site) at scale."};
  std::vector<std::size_t> sites{16, 100};
  std::vector<double> losses{0, 0.01};
  std::vector<std::size_t> computed{1000, 10000};
  std::vector<std::size_t> probed{};
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
  app.add_option("--probe-sites", probed, "sizes at which one real site's costs are measured")->delimiter(',');
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

  if (std::any_of(probed.begin(), probed.end(), [](std::size_t n) { return n >= 2; })) {
    std::printf("\n| sites | per heartbeat taken µs | per member list taken ms | per tick ms | driver CPU ms/s per site | setup CPU s |\n");
    std::printf("|---|---|---|---|---|---|\n");
  }
  for (std::size_t n : probed) {
    if (n < 2) continue;
    const ProbeCosts c = probe(n, o);
    // Each interval a site takes a heartbeat from each other member and, on average, one member list,
    // and runs one tick.
    const double per_s = (static_cast<double>(n - 1) * c.heartbeat_us + c.member_list_us + c.tick_us) / 1000 /
                         std::chrono::duration<double>(o.heartbeat_interval).count();
    std::printf("| %zu | %.1f | %.2f | %.1f | %.1f | %.0f |\n", n, c.heartbeat_us, c.member_list_us / 1000,
                c.tick_us / 1000, per_s, c.setup_s);
    std::fflush(stdout);
  }
  return 0;
}
