// The mixers over real sockets: ZeroMQ transports on tcp://127.0.0.1:* (ephemeral ports), CurveZMQ
// with a roster, three sites in one process (one thread each), and a site that crashes mid-run.
#include <catch2/catch.hpp>

#if __has_include("peer/zmq_transport.h")

#include <cstring>
#include <functional>
#include <map>
#include <random>
#include <thread>

#include "gossip/average_mixer.h"
#include "gossip/group_mixer.h"
#include "gossip/inbox.h"
#include "gossip/push_sum_mixer.h"
#include "peer/curve_keys.h"
#include "peer/roster.h"
#include "peer/zmq_transport.h"

using namespace meridian;
using namespace meridian::gossip;
using namespace std::chrono_literals;

namespace {

// Polls `cond`; the bound only guards against a hang, it is no performance claim.
bool eventually(const std::function<bool()>& cond, std::chrono::milliseconds guard = 30s) {
  const auto deadline = std::chrono::steady_clock::now() + guard;
  while (std::chrono::steady_clock::now() < deadline) {
    if (cond()) return true;
    std::this_thread::sleep_for(5ms);
  }
  return cond();
}

struct Federation {
  std::vector<std::string> names;
  std::map<std::string, peer::CurveKeyPair> keys;
  peer::Roster roster;
  std::vector<std::unique_ptr<peer::ZmqTransport>> sites;

  explicit Federation(std::vector<std::string> all) : names(std::move(all)) {
    for (const auto& n : names) {
      keys[n] = peer::generate_curve_key_pair();
      roster.add({n, keys[n].public_key, ""});
    }
    for (const auto& n : names) {
      peer::ZmqTransportOptions o;
      o.name = n;
      o.keys = keys.at(n);
      o.roster = roster;
      if (!sites.empty()) o.bootstrap = {names[0] + "@" + sites[0]->endpoint()};
      o.heartbeat_interval = 50ms;
      // Long enough that a loaded machine starving an I/O thread does not declare a live site dead (a
      // false death changes the view mid-section); the crash test waits this long once.
      o.heartbeat_timeout = 2000ms;
      sites.push_back(std::make_unique<peer::ZmqTransport>(o));
    }
  }

  // Waits until every live site runs in the same view holding exactly `members`; returns it.
  peer::View agreed_view(const std::vector<std::string>& members) {
    auto live = [&] {
      std::vector<peer::ZmqTransport*> out;
      for (auto& s : sites)
        if (s && std::count(members.begin(), members.end(), s->self())) out.push_back(s.get());
      return out;
    };
    REQUIRE(eventually([&] {
      auto l = live();
      for (auto* s : l)
        if (s->latest_view().members != members || !(s->latest_view() == l[0]->latest_view())) return false;
      return true;
    }));
    return live()[0]->latest_view();
  }

  // Runs body(rank, transport) on one thread per listed site.
  void run(const std::vector<std::size_t>& ranks, const std::function<void(std::size_t, peer::ZmqTransport&)>& body) {
    std::vector<std::thread> threads;
    for (auto r : ranks) threads.emplace_back([&, r] { body(r, *sites[r]); });
    for (auto& t : threads) t.join();
  }
};

}  // namespace

TEST_CASE("mixers over ZeroMQ: exact average, push-sum mass, dsync groups", "[gossip][zmq]") {
  Federation fed({"a", "b", "c"});
  const peer::View view = fed.agreed_view(fed.names);
  const std::uint64_t step = view.effective_round;  // the first step all three run in

  SECTION("ring average of a tensor that spans many wire chunks is bit-identical everywhere") {
    const std::size_t size = 600'001;
    std::vector<std::vector<float>> data(3, std::vector<float>(size));
    std::mt19937 rng(3);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    for (auto& d : data)
      for (auto& x : d) x = dist(rng);
    auto in = data;
    fed.run({0, 1, 2}, [&](std::size_t r, peer::ZmqTransport& t) {
      Inbox inbox(t);
      AverageMixer mixer(inbox);
      double w = 1.0;
      auto report = mixer.mix(step, RoundTag::kMix, data[r], w);
      CHECK(report.view_id == view.id);
      CHECK(report.abandoned == 0);
    });
    for (std::size_t i = 0; i < size; i += 997)
      CHECK(data[0][i] == Approx((double(in[0][i]) + in[1][i] + in[2][i]) / 3).margin(1e-6));
    CHECK(std::memcmp(data[0].data(), data[1].data(), size * sizeof(float)) == 0);
    CHECK(std::memcmp(data[0].data(), data[2].data(), size * sizeof(float)) == 0);
  }

  SECTION("push-sum conserves mass exactly and dsync's ragged grid reaches everyone in 3 steps") {
    // Multiples of 1/16 below 8: exact for 16 push-sum steps (see push_sum_test.cc).
    std::vector<std::vector<float>> x = {{0.5f, 7.0f}, {3.25f, 0.0f}, {1.0f, 2.5f}};
    std::vector<double> w(3, 1.0);
    std::vector<std::vector<float>> onehot = {{1, 0, 0}, {0, 1, 0}, {0, 0, 1}};
    fed.run({0, 1, 2}, [&](std::size_t r, peer::ZmqTransport& t) {
      Inbox inbox(t);
      PushSumMixer sgp(inbox);
      for (std::uint64_t k = 0; k < 16; ++k) {
        t.set_round(step + k);
        sgp.mix(step + k, RoundTag::kMix, x[r], w[r]);
      }
      GroupMixer dsync(inbox);
      double unused = 1.0;
      for (std::uint64_t k = 16; k < 19; ++k) dsync.mix(step + k, RoundTag::kMix, onehot[r], unused);
    });
    CHECK(double(x[0][0]) + x[1][0] + x[2][0] == 4.75);
    CHECK(double(x[0][1]) + x[1][1] + x[2][1] == 9.5);
    CHECK(w[0] + w[1] + w[2] == 3.0);
    for (auto& v : onehot)
      for (float f : v) CHECK(f > 0.0f);
  }
}

TEST_CASE("over ZeroMQ, a crashed site's round is abandoned and redone by the survivors in the next view",
          "[gossip][zmq][faults]") {
  Federation fed({"a", "b", "c"});
  const peer::View view = fed.agreed_view(fed.names);
  fed.sites[2].reset();  // c crashes: no leave message; the others notice by missed heartbeats
  RoundTimeouts timeouts;
  timeouts.round = 300ms;
  std::vector<std::vector<float>> data = {{1.0f, 10.0f}, {3.0f, 20.0f}};
  std::vector<MixReport> reports(2);
  fed.run({0, 1}, [&](std::size_t r, peer::ZmqTransport& t) {
    Inbox inbox(t);
    AverageMixer mixer(inbox, timeouts);
    double w = 1.0;
    reports[r] = mixer.mix(view.effective_round, RoundTag::kMix, data[r], w);
  });
  for (std::size_t r = 0; r < 2; ++r) {
    CHECK(reports[r].abandoned >= 1);
    CHECK(reports[r].view_id > view.id);
    CHECK(data[r] == std::vector<float>{2.0f, 15.0f});
  }
}

#else

TEST_CASE("mixers over ZeroMQ", "[gossip][zmq]") { WARN("SKIPPED: peer/zmq_transport.h is not in this tree yet"); }

#endif
