#include <catch2/catch.hpp>

#include <atomic>
#include <cmath>
#include <exception>
#include <functional>
#include <memory>
#include <thread>

#include "gossip/average_mixer.h"
#include "gossip/delayed_mixing.h"
#include "gossip/direct_mean_mixer.h"
#include "gossip/dts.h"
#include "gossip/mix_channel.h"
#include "gossip/mix_server.h"
#include "gossip/synchronous_average.h"
#include "peer/in_memory_transport.h"
#include "site_cluster.h"
#include "tests/gossip/dropping_transport.h"

using namespace meridian::gossip;
using meridian::gossip::testing::MixerKind;
using meridian::gossip::testing::SiteCluster;
using namespace std::chrono_literals;

namespace {

// n sites as SiteCluster wires them (the ring, or the dense direct exchange taking re-averages too),
// whose sends pass `drop`, which sees sender, receiver and message, and loses those it picks.
class LossyCluster {
 public:
  using Drop = std::function<bool(const std::string& from, const std::string& to, const meridian::peer::Message&)>;

  LossyCluster(std::size_t n, MixerKind kind, RoundTimeouts timeouts, Drop drop)
      : names_(meridian::gossip::testing::site_names(n)), net_(meridian::peer::InMemoryNetwork::create(names_)) {
    for (const auto& name : names_) {
      auto s = std::make_unique<Site>();
      auto transport = std::make_unique<meridian::gossip::testing::DroppingTransport>(
          net_->endpoint(name), [drop, name](const std::string& to, const meridian::peer::Message& m) {
            return drop(name, to, m);
          });
      s->lossy = transport.get();
      s->transport = std::move(transport);
      s->inbox = std::make_unique<Inbox>(*s->transport);
      s->averager = std::make_unique<AverageMixer>(*s->inbox, timeouts);
      Mixer* mixer = s->averager.get();
      if (kind == MixerKind::kDirectMean) {
        s->direct = std::make_unique<DirectMeanMixer>(*s->inbox, *s->averager, CompressionSpec{}, timeouts);
        mixer = s->direct.get();
      }
      s->channel = std::make_unique<MixChannel>();
      s->server = std::make_unique<MixServer>(*s->channel, *mixer, *mixer);
      s->thread = std::make_unique<MixThread>(*s->channel, *s->server);
      sites_.push_back(std::move(s));
    }
  }

  // Runs body(rank, channel) for every site on its own thread; rethrows the first exception.
  void run(const std::function<void(std::size_t, MixChannel&)>& body) {
    std::vector<std::exception_ptr> errors(sites_.size());
    std::vector<std::thread> threads;
    for (std::size_t r = 0; r < sites_.size(); ++r)
      threads.emplace_back([&, r] {
        try {
          body(r, *sites_[r]->channel);
        } catch (...) {
          errors[r] = std::current_exception();
        }
      });
    for (auto& t : threads) t.join();
    for (auto& e : errors)
      if (e) std::rethrow_exception(e);
  }

  std::uint64_t dropped() const {
    std::uint64_t total = 0;
    for (const auto& s : sites_) total += s->lossy->dropped();
    return total;
  }

 private:
  struct Site {
    std::unique_ptr<meridian::peer::Transport> transport;
    meridian::gossip::testing::DroppingTransport* lossy = nullptr;
    std::unique_ptr<Inbox> inbox;
    std::unique_ptr<AverageMixer> averager;
    std::unique_ptr<DirectMeanMixer> direct;
    std::unique_ptr<MixChannel> channel;
    std::unique_ptr<MixServer> server;
    std::unique_ptr<MixThread> thread;  // last: joins first
  };
  std::vector<std::string> names_;
  std::shared_ptr<meridian::peer::InMemoryNetwork> net_;
  std::vector<std::unique_ptr<Site>> sites_;
};

// Plays the membership layer: once every survivor has abandoned a round, announces the survivors'
// view effective from `round`. Gives up (and the test fails on the missing view) after a minute.
std::thread announce_after_abandon(SiteCluster& cluster, std::vector<std::size_t> survivors, std::uint64_t round) {
  return std::thread([&cluster, survivors, round] {
    for (int i = 0; i < 60000; ++i) {
      bool all = true;
      for (auto r : survivors) all = all && cluster.site(r).averager->abandoned() >= 1;
      if (all) break;
      std::this_thread::sleep_for(1ms);
    }
    std::vector<std::string> names;
    for (auto r : survivors) names.push_back(cluster.names()[r]);
    cluster.network().announce(meridian::peer::View::of(names, 1, round));
  });
}

// What each site averaged and how its mix went.
struct SurvivorMix {
  std::vector<std::vector<float>> data;
  std::vector<MixReport> reports;
};

// Every site but `absent` averages {its rank, 1} at step 0; `absent` never takes part. Each waits at
// most a minute, the hang guard: a mix that needs longer fails the test.
SurvivorMix average_without(SiteCluster& cluster, std::size_t absent) {
  SurvivorMix out{std::vector<std::vector<float>>(cluster.size()), std::vector<MixReport>(cluster.size())};
  cluster.run([&](std::size_t r, MixChannel& channel) {
    if (r == absent) return;
    out.data[r] = {static_cast<float>(r), 1.0f};
    out.reports[r] = average_now(channel, 0, out.data[r], 60s);
  });
  return out;
}

double relative_spread(const std::vector<std::vector<float>>& replicas, const std::vector<std::size_t>& which) {
  double worst = 0;
  for (std::size_t i = 0; i < replicas[which[0]].size(); ++i)
    for (auto r : which) {
      double a = replicas[r][i], b = replicas[which[0]][i];
      worst = std::max(worst, std::abs(a - b) / std::max(1.0, std::abs(b)));
    }
  return worst;
}

}  // namespace

TEST_CASE("an average whose round cannot finish is abandoned and redone by the survivors in the next view",
          "[gossip][faults][cluster]") {
  RoundTimeouts timeouts;
  timeouts.round = 100ms;
  SiteCluster cluster(4, MixerKind::kAverage, timeouts);
  cluster.network().kill(cluster.names()[2]);
  auto announcer = announce_after_abandon(cluster, {0, 1, 3}, 0);
  const auto mixed = average_without(cluster, 2);
  announcer.join();
  for (std::size_t r : {0u, 1u, 3u}) {
    CHECK(mixed.reports[r].abandoned == 1);
    CHECK(mixed.reports[r].view_id == 1);
    CHECK(mixed.data[r] == std::vector<float>{4.0f / 3.0f, 1.0f});
  }
}

TEST_CASE("a direct-exchange average gives up at once on a member that a newer view leaves out",
          "[gossip][faults][cluster]") {
  // The round's deadline is an hour away: only the newer view can end the wait within the 60 s that
  // average_now() allows before it fails the test.
  RoundTimeouts timeouts;
  timeouts.round = 1h;
  SiteCluster cluster(3, MixerKind::kDirectMean, timeouts);
  // site02 stopped before this step (as sites stopped together do, a step apart) and never contributes.
  // Once it has the others' contributions they are waiting for its own: then its leave is announced.
  std::thread membership([&] {
    int got = 0;
    while (got < 2)
      if (cluster.site(2).transport->receive(100ms)) ++got;
    cluster.network().announce(meridian::peer::View::of({cluster.names()[0], cluster.names()[1]}, 1, 0));
  });
  const auto mixed = average_without(cluster, 2);
  membership.join();
  for (std::size_t r : {0u, 1u}) {
    CHECK(mixed.reports[r].abandoned == 1);
    CHECK(mixed.reports[r].view_id == 1);
    CHECK(mixed.data[r] == std::vector<float>{0.5f, 1.0f});  // redone by the two in the newer view
  }
}

TEST_CASE("an abandoned round that a peer has moved past is skipped, not redone, and reports its first view",
          "[gossip][faults][cluster]") {
  // b completed step 5 (a member died during the all-gather) and went on; a abandoned it. A redo would
  // wait for b, which never comes back to step 5, while b waits for a at its next step.
  auto net = meridian::peer::InMemoryNetwork::create({"a", "b"});
  auto a = net->endpoint("a");
  auto b = net->endpoint("b");
  Inbox inbox(*a);
  RoundTimeouts timeouts;
  timeouts.round = 100ms;
  timeouts.view_change = 60s;
  AverageMixer mixer(inbox, timeouts);
  std::thread peer([&] {
    // Once a has abandoned step 5 in view 0, the membership layer announces view 1 and b's mail of
    // step 7 arrives in it.
    while (mixer.abandoned() == 0) std::this_thread::sleep_for(1ms);
    net->announce(meridian::peer::View::of({"a", "b"}, 1, 6));
    meridian::peer::Message later;
    later.kind = meridian::peer::MessageKind::kReduceChunk;
    later.view_id = 1;
    later.round = 7;
    later.total = 2;
    later.payload = {9.0f, 9.0f};
    b->send("a", later);
  });
  std::vector<float> data = {1.0f, 2.0f};
  double weight = 1.0;
  const auto report = mixer.mix(5, RoundTag::kMix, data, weight);
  peer.join();
  CHECK(report.abandoned >= 1);
  CHECK(report.view_id == 0);                     // as b reports the step it completed in view 0
  CHECK(data == std::vector<float>{1.0f, 2.0f});  // a keeps its own values
  // b's step-7 mail is still there for a's next round.
  CHECK(inbox.take([](const meridian::peer::Message& m) { return m.round == 7; }, Clock::now()).has_value());
}

TEST_CASE("a round abandoned where nobody died fails no site: it is redone in the same view and every site ends "
          "it with the same bits",
          "[gossip][faults][cluster]") {
  // A member slower than the round deadline (or whose messages a link that dropped briefly lost): the
  // others abandon the round and no view without anybody comes. They redo it in view 0 under a fresh
  // attempt, whose pieces every member takes again; the late member finds mail of that attempt and
  // follows it, and every site ends with the same bits, the mean, over the ring as over the direct
  // exchange.
  RoundTimeouts timeouts;
  timeouts.round = 1s;
  timeouts.view_change = 100ms;
  for (const auto kind : {MixerKind::kAverage, MixerKind::kDirectMean}) {
    INFO("mixer kind " << static_cast<int>(kind));
    const std::size_t n = 3, late = 2;
    SiteCluster cluster(n, kind, timeouts);
    auto abandoned = [&](std::size_t r) -> std::uint64_t {
      if (kind == MixerKind::kDirectMean) return dynamic_cast<DirectMeanMixer&>(*cluster.site(r).algorithm).abandoned();
      return cluster.site(r).averager->abandoned();
    };
    std::vector<std::vector<float>> data(n);
    std::vector<MixReport> reports(n);
    cluster.run([&](std::size_t r, MixChannel& channel) {
      // The late site starts once both others have abandoned the round (a minute at most: the hang guard).
      for (int i = 0; r == late && i < 60000 && (abandoned(0) < 1 || abandoned(1) < 1); ++i)
        std::this_thread::sleep_for(1ms);
      data[r] = {static_cast<float>(r), 1.0f, 0.5f * static_cast<float>(r)};
      reports[r] = average_now(channel, 4, data[r], 60s);
    });
    CHECK(reports[0].abandoned >= 1);
    CHECK(reports[1].abandoned >= 1);
    for (std::size_t r = 0; r < n; ++r) {
      INFO("site " << r);
      CHECK_FALSE(reports[r].sat_out);
      CHECK(reports[r].view_id == 0);
      CHECK(data[r] == data[0]);
    }
    CHECK(data[0][0] == Approx(1.0f));
    CHECK(data[0][1] == Approx(1.0f));
    CHECK(data[0][2] == Approx(0.5f));
  }
}

TEST_CASE("a site that lost the last piece of a round others completed takes their result: the same bits everywhere",
          "[gossip][faults][cluster]") {
  // site00's last message of step 4 to site01 is lost (the ring's last all-gather piece, or its
  // contribution in the direct exchange) and nobody is found dead: site00 and site02 complete the
  // round and move on to step 5, where they wait for site01. site01 abandons step 4, sees that a
  // peer moved past it, and asks for the result; the others hand it over from their wait in step 5.
  // Every site ends both steps with the same bits.
  RoundTimeouts timeouts;
  timeouts.round = 1s;
  timeouts.view_change = 100ms;
  for (const auto kind : {MixerKind::kAverage, MixerKind::kDirectMean}) {
    INFO("mixer kind " << static_cast<int>(kind));
    const auto lost_kind =
        kind == MixerKind::kAverage ? meridian::peer::MessageKind::kReduceChunk : meridian::peer::MessageKind::kCompressedShare;
    // Ring of three: the all-gather's last phase is 3, and site01 receives it from site00 last.
    const std::uint32_t lost_phase = kind == MixerKind::kAverage ? 3 : 0;
    std::atomic<bool> lost{false};
    LossyCluster cluster(3, kind, timeouts,
                         [&](const std::string& from, const std::string& to, const meridian::peer::Message& m) {
                           return from == "site00" && to == "site01" && m.kind == lost_kind && m.round == 4 &&
                                  m.phase == lost_phase && !lost.exchange(true);
                         });
    std::vector<std::vector<float>> step4(3), step5(3);
    std::vector<MixReport> reports(3);
    cluster.run([&](std::size_t r, MixChannel& channel) {
      step4[r] = {static_cast<float>(r), 1.0f, 0.25f * static_cast<float>(r), -2.0f};
      reports[r] = average_now(channel, 4, step4[r], 60s);
      step5[r] = {1.0f / static_cast<float>(r + 3), 2.0f * static_cast<float>(r), 0.0f, 1.0f};
      (void)average_now(channel, 5, step5[r], 60s);
    });
    CHECK(cluster.dropped() == 1);
    CHECK(reports[1].abandoned >= 1);
    for (std::size_t r = 0; r < 3; ++r) {
      INFO("site " << r);
      CHECK(reports[r].view_id == 0);
      CHECK(step4[r] == step4[0]);
      CHECK(step5[r] == step5[0]);
    }
    CHECK(step4[0][0] == Approx(1.0f));
    CHECK(step4[0][2] == Approx(0.25f));
  }
}

TEST_CASE("a site dropped from the view sits the mix out, neither failing nor hanging", "[gossip][faults][cluster]") {
  // The others found it dead (a partition, or missed heartbeats on a loaded machine): it keeps its own
  // values until a view takes it back. Over the ring and over dts' direct exchange alike.
  for (const auto kind : {MixerKind::kAverage, MixerKind::kDirectMean}) {
    SiteCluster cluster(3, kind);
    cluster.network().announce(meridian::peer::View::of({cluster.names()[0], cluster.names()[1]}, 1, 5));
    std::vector<float> g = {1.0f};
    const MixReport report = average_now(*cluster.site(2).channel, 5, g, 10s);
    INFO("mixer kind " << static_cast<int>(kind));
    CHECK(report.sat_out);
    CHECK(report.view_id == 1);
    CHECK(g == std::vector<float>{1.0f});
  }
}

TEST_CASE("dts survives a death: the round is redone in the next view, then parameters are re-averaged",
          "[gossip][faults][dts][cluster]") {
  RoundTimeouts timeouts;
  timeouts.round = 100ms;
  const std::size_t n = 4, dead = 3;
  SiteCluster cluster(n, MixerKind::kAverage, timeouts);
  // Announced ahead (effective at step 18), as membership does: the stuck step 10 is redone in it anyway.
  auto announcer = announce_after_abandon(cluster, {0, 1, 2}, 18);
  std::vector<std::vector<float>> params(n, std::vector<float>(5, 0.0f));
  std::vector<std::uint64_t> reaverages(n), abandoned(n);
  cluster.run([&](std::size_t r, MixChannel& channel) {
    std::vector<float> u(5, 0.0f), g(5);
    DtsConfig config;
    config.delay = 2;
    config.momentum = 0.5;
    Dts dts(config, channel, params[r], u);
    for (std::uint64_t k = 0; k < 40; ++k) {
      if (r == dead && k == 10) {
        dts.finish();  // its last rounds complete; it dies between rounds
        cluster.network().kill(cluster.names()[r]);
        return;
      }
      for (std::size_t i = 0; i < 5; ++i) g[i] = static_cast<float>(std::cos(k + 2.0 * r + i));
      dts.step(k, g, 0.05);
    }
    dts.finish();
    reaverages[r] = dts.reaverages();
    abandoned[r] = dts.abandoned_rounds();
  });
  announcer.join();
  for (std::size_t r = 0; r < dead; ++r) {
    CHECK(abandoned[r] == 1);
    CHECK(reaverages[r] == 2);  // the first view, then the view change: one exact re-average each
  }
  CHECK(relative_spread(params, {0, 1, 2}) < 1e-5);
}

TEST_CASE("re-averaging keeps replicas within 1e-5 of each other over 10,000 steps", "[gossip][faults][cluster]") {
  const std::uint64_t steps = 10'000;
  SECTION("dts, momentum, D = 2") {
    const std::size_t n = 4;
    SiteCluster cluster(n, MixerKind::kAverage);
    std::vector<std::vector<float>> params(n, std::vector<float>(8, 1.0f));
    std::vector<std::uint64_t> reaverages(n);
    cluster.run([&](std::size_t r, MixChannel& channel) {
      std::vector<float> u(8, 0.0f), g(8);
      DtsConfig config;
      config.delay = 2;
      config.momentum = 0.9;
      config.reaverage_every = 100;
      Dts dts(config, channel, params[r], u);
      for (std::uint64_t k = 0; k < steps; ++k) {
        for (std::size_t i = 0; i < 8; ++i) g[i] = static_cast<float>(std::sin(0.01 * k * (i + 1) + r) + 0.3 * r);
        dts.step(k, g, 1e-3);
      }
      dts.finish();
      reaverages[r] = dts.reaverages();
    });
    for (auto count : reaverages) CHECK(count == steps / 100);  // the first view's, then every 100 steps
    CHECK(relative_spread(params, {0, 1, 2, 3}) < 1e-5);
  }
  SECTION("dsync on a ragged grid (5 sites), gradients that depend on the parameters") {
    const std::size_t n = 5;
    SiteCluster cluster(n, MixerKind::kGroup);
    std::vector<std::vector<float>> params(n, std::vector<float>(8, 1.0f));
    std::vector<std::uint64_t> reaverages(n);
    cluster.run([&](std::size_t r, MixChannel& channel) {
      DelayedMixingConfig config;
      config.reaverage_every = 100;
      DelayedMixing dsync(config, channel, params[r]);
      for (std::uint64_t k = 0; k < steps; ++k) {
        // Pulled towards a moving target: the same function on every site, so replicas differ only by
        // rounding (groups of 2 and 3 round differently).
        for (std::size_t i = 0; i < 8; ++i)
          params[r][i] -= 0.1f * (params[r][i] - static_cast<float>(std::sin(0.001 * k + i) * 1e3));
        dsync.after_step(k);
      }
      dsync.finish();
      reaverages[r] = dsync.reaverages();
    });
    for (auto count : reaverages) CHECK(count == steps / 100);  // the first view's, then every 100 steps
    CHECK(relative_spread(params, {0, 1, 2, 3, 4}) < 1e-5);
  }
}

TEST_CASE("a dts site that joins mid-window agrees on windows by step number and is pulled in by a re-average",
          "[gossip][faults][dts][cluster]") {
  // Two sites train from step 0; the third joins at step 10 (the middle of the window [9, 12) with
  // P = 3), from different parameters, as a restarted site would. Its first view is the others' view
  // change: all three re-average at the same window start, and they end on the same parameters.
  RoundTimeouts timeouts;
  timeouts.round = 2s;
  const std::size_t n = 3, late = 2;
  const std::uint64_t join_at = 10, steps = 40;
  SiteCluster cluster(n, MixerKind::kAverage, timeouts);
  const auto& names = cluster.names();
  cluster.network().announce(meridian::peer::View::of({names[0], names[1]}, 1, 0));
  cluster.network().announce(meridian::peer::View::of(names, 2, join_at));
  std::vector<std::vector<float>> params(n, std::vector<float>(6, 1.0f));
  params[late].assign(6, 5.0f);
  std::vector<std::uint64_t> reaverages(n), abandoned(n);
  cluster.run([&](std::size_t r, MixChannel& channel) {
    std::vector<float> u(6, 0.0f), g(6);
    DtsConfig config;
    config.delay = 2;
    config.period = 3;
    config.momentum = 0.5;
    config.wait_timeout = 20s;
    Dts dts(config, channel, params[r], u);
    for (std::uint64_t k = r == late ? join_at : 0; k < steps; ++k) {
      for (std::size_t i = 0; i < 6; ++i) g[i] = static_cast<float>(std::cos(0.3 * k + 2.0 * r + i));
      dts.step(k, g, 0.05);
    }
    dts.finish();
    reaverages[r] = dts.reaverages();
    abandoned[r] = dts.abandoned_rounds();
  });
  for (std::size_t r = 0; r < n; ++r) CHECK(abandoned[r] == 0);
  CHECK(reaverages[0] == 2);  // its first view, then the view that takes the third site in
  CHECK(reaverages[1] == 2);
  CHECK(reaverages[late] == 1);  // its first view: the same round as the others' second
  CHECK(relative_spread(params, {0, 1, 2}) < 1e-5);
}
