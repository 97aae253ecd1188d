// The CPU secure aggregation adds to an exact mean: several sites in one process on the in-memory
// network (one thread each, no sockets, so that only the mixers' own work is measured) average a model
// of --mb megabytes --rounds times, first with the ring all-reduce allreduce uses (gossip/average_mixer.h),
// then with masked shares (privacy/secure_mean_mixer.h). Prints, per method, the process CPU seconds per
// round and per MB of model per site, and the difference.
//
// Usage: meridian_bench_secure_aggregation [--sites 4] [--mb 16] [--rounds 10]
#include <CLI/CLI.hpp>

#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "gossip/average_mixer.h"
#include "gossip/inbox.h"
#include "peer/curve_keys.h"
#include "peer/in_memory_transport.h"
#include "privacy/secure_mean_mixer.h"

using namespace meridian;

namespace {

double process_cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

struct Figures {
  double cpu_seconds = 0;
  double wall_seconds = 0;
};

// Runs `rounds` mixes of `floats` values on every site, one thread per site; the mixer of site r comes
// from make(r, inbox). The first round warms buffers and is not counted.
Figures measure(std::size_t sites, std::size_t floats, std::size_t rounds,
                const std::function<std::unique_ptr<gossip::Mixer>(std::size_t, gossip::Inbox&)>& make) {
  std::vector<std::string> names;
  for (std::size_t r = 0; r < sites; ++r) names.push_back("site" + std::to_string(r));
  auto net = peer::InMemoryNetwork::create(names);
  std::vector<std::unique_ptr<peer::Transport>> transports;
  for (const auto& n : names) transports.push_back(net->endpoint(n));
  std::vector<std::vector<float>> data(sites, std::vector<float>(floats));
  std::mt19937 rng(1);
  std::normal_distribution<float> dist(0.0f, 0.1f);
  for (auto& d : data)
    for (auto& v : d) v = dist(rng);
  Figures f;
  auto run_rounds = [&](std::uint64_t first, std::size_t count, std::vector<std::unique_ptr<gossip::Mixer>>& mixers) {
    std::vector<std::thread> threads;
    for (std::size_t r = 0; r < sites; ++r)
      threads.emplace_back([&, r] {
        double w = 1.0;
        for (std::size_t k = 0; k < count; ++k) mixers[r]->mix(first + k, gossip::RoundTag::kMix, data[r], w);
      });
    for (auto& t : threads) t.join();
  };
  std::vector<std::unique_ptr<gossip::Inbox>> inboxes;
  std::vector<std::unique_ptr<gossip::Mixer>> mixers;
  for (std::size_t r = 0; r < sites; ++r) {
    inboxes.push_back(std::make_unique<gossip::Inbox>(*transports[r]));
    mixers.push_back(make(r, *inboxes[r]));
  }
  run_rounds(0, 1, mixers);
  const double cpu0 = process_cpu_seconds();
  const auto wall0 = std::chrono::steady_clock::now();
  run_rounds(1, rounds, mixers);
  f.cpu_seconds = process_cpu_seconds() - cpu0;
  f.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  return f;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"CPU added by secure aggregation to an exact mean"};
  std::size_t sites = 4, rounds = 10;
  double mb = 16;
  app.add_option("--sites", sites, "Sites, one thread each")->check(CLI::Range(3, 64));
  app.add_option("--mb", mb, "Model size in MB (float32)")->check(CLI::PositiveNumber);
  app.add_option("--rounds", rounds, "Rounds measured (after one warm-up round)")->check(CLI::Range(1, 10000));
  CLI11_PARSE(app, argc, argv);
  const auto floats = static_cast<std::size_t>(mb * 1e6 / 4);

  const auto plain = measure(sites, floats, rounds, [](std::size_t, gossip::Inbox& inbox) {
    return std::make_unique<gossip::AverageMixer>(inbox);
  });

  std::map<std::string, peer::CurveKeyPair> keys;
  for (std::size_t r = 0; r < sites; ++r) keys["site" + std::to_string(r)] = peer::generate_curve_key_pair();
  std::vector<std::unique_ptr<privacy::PairKeys>> pair_keys;
  std::vector<privacy::SecureAggregationCounters> counters(sites);
  const auto secure = measure(sites, floats, rounds, [&](std::size_t r, gossip::Inbox& inbox) {
    pair_keys.push_back(std::make_unique<privacy::PairKeys>(
        keys.at("site" + std::to_string(r)),
        [&](const std::string& name) -> std::optional<std::string> { return keys.at(name).public_key; }));
    return std::make_unique<privacy::SecureMeanMixer>(inbox, *pair_keys.back(), counters[r], gossip::RoundTimeouts{},
                                                      privacy::SecureMeanMixer::whole_view(), privacy::kWholeViewDomain,
                                                      privacy::SecureMeanMixer::Abandon::kRedo);
  });

  const double per = static_cast<double>(rounds) * static_cast<double>(sites) * mb;
  std::printf("sites %zu, model %.1f MB, %zu rounds\n", sites, mb, rounds);
  std::printf("ring all-reduce: %.3f ms CPU per MB per site per round (wall %.3f s)\n", 1e3 * plain.cpu_seconds / per,
              plain.wall_seconds);
  std::printf("secure mean:     %.3f ms CPU per MB per site per round (wall %.3f s)\n", 1e3 * secure.cpu_seconds / per,
              secure.wall_seconds);
  std::printf("added:           %.3f ms CPU per MB per site per round\n",
              1e3 * (secure.cpu_seconds - plain.cpu_seconds) / per);
  return 0;
}
