// The mixers over real sockets: ZeroMQ transports on tcp://127.0.0.1:* (ephemeral ports), CurveZMQ
// with a roster, three sites in one process (one thread each), and a site that crashes mid-run.
#include <catch2/catch.hpp>

#include <cstring>
#include <functional>
#include <latch>
#include <map>
#include <random>
#include <thread>

#include "gossip/average_mixer.h"
#include "gossip/group_mixer.h"
#include "gossip/inbox.h"
#include "gossip/push_sum_mixer.h"
#include "peer/curve_keys.h"
#include "peer/roster.h"
#include "peer/wan_model.h"
#include "peer/zmq/zmq_transport.h"
#include "tests/support/eventually.h"

using namespace meridian;
using namespace meridian::gossip;
using namespace std::chrono_literals;

namespace {

using meridian::tests::eventually;

struct Federation {
  std::vector<std::string> names;
  std::map<std::string, peer::CurveKeyPair> keys;
  peer::Roster roster;
  std::vector<std::unique_ptr<peer::ZmqTransport>> sites;

  // `wan`: emulated links on every site's send path (none by default).
  explicit Federation(std::vector<std::string> all, const peer::WanModel& wan = {}) : names(std::move(all)) {
    for (const auto& n : names) {
      keys[n] = peer::generate_curve_key_pair();
      roster.add({n, keys[n].public_key, ""});
    }
    for (const auto& n : names) {
      peer::ZmqTransportOptions o;
      o.name = n;
      o.keys = keys.at(n);
      o.roster = roster;
      o.wan = wan;
      if (!sites.empty()) o.bootstrap = {names[0] + "@" + sites[0]->endpoint()};
      o.heartbeat_interval = 50ms;
      // Long enough that a loaded machine starving an I/O thread does not declare a live site dead (a
      // false death changes the view mid-section); the crash test waits this long once.
      o.heartbeat_timeout = 2000ms;
      sites.push_back(std::make_unique<peer::ZmqTransport>(o));
    }
  }

  // Waits until every live site counts exactly `members` alive and runs in the same view holding
  // them; returns it. The view alone is not enough: a site may take a view from a peer before the
  // hello of a member in it has reached it over a slow link, and until then it holds that member as
  // only heard of and may still propose a view without it.
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
        if (s->alive_members() != members || s->latest_view().members != members ||
            !(s->latest_view() == l[0]->latest_view()))
          return false;
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

TEST_CASE("mixers over ZeroMQ: exact average, push-sum mass, dsync groups", "[gossip][zmq][cluster]") {
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
          "[gossip][zmq][faults][cluster]") {
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

// The staleness bound lets a site run ahead of its peers' shares: over links that delay every message
// by 400 ms (one way), a site with τ = 8 finishes its mixes of steps 0 .. 7 without waiting (mix k
// waits only for the shares of steps ≤ k − 8), so it completes several mixes before the first share
// of a peer is in, and at most 8: the mix of step 8 cannot finish without the shares of step 0.
// With τ = 0 every mix waits for its own step's shares, so none finishes before a share is in. The
// count is a behaviour (how many mixes went by), not a time; Σx and Σw are exact once settle() has
// brought the shares in flight home (the dyadic argument of push_sum_test.cc, 12 steps). The sites start
// mixing together (a latch), and the delay is long enough that a site whose thread a loaded machine
// schedules late still starts before its peers' first shares reach it: at 150 ms, a late start let
// them arrive first and the site "ran ahead" by 0 mixes.
TEST_CASE("over 400 ms links, push-sum with staleness bound 8 runs ahead of its peers' shares, and no further",
          "[gossip][zmq][sgp][wan][cluster]") {
  const std::uint64_t tau = GENERATE(as<std::uint64_t>{}, 0, 8);
  INFO("staleness bound " << tau);
  Federation fed({"a", "b", "c"}, peer::parse_wan_spec("latency=400ms"));
  const peer::View view = fed.agreed_view(fed.names);
  const std::uint64_t first = view.effective_round;
  const std::uint64_t steps = 12;
  std::vector<std::vector<float>> x = {{0.5f, 7.0f}, {3.25f, 0.0f}, {1.0f, 2.5f}};
  std::vector<double> w(3, 1.0);
  std::vector<std::uint64_t> ahead(3, 0), missing(3, 0);
  std::latch ready(3);
  fed.run({0, 1, 2}, [&](std::size_t r, peer::ZmqTransport& t) {
    Inbox inbox(t);
    PushSumMixer sgp(inbox, 1, {}, {}, {}, tau);
    ready.arrive_and_wait();
    for (std::uint64_t k = 0; k < steps; ++k) {
      t.set_round(first + k);
      sgp.mix(first + k, RoundTag::kMix, x[r], w[r]);
      if (sgp.received() == 0) ++ahead[r];  // this mix finished before any share of a peer was in
    }
    sgp.settle(x[r], w[r]);
    missing[r] = sgp.missing();
  });
  for (std::size_t r = 0; r < 3; ++r) {
    INFO("site " << r << ": " << ahead[r] << " mixes before the first share");
    if (tau == 0) {
      CHECK(ahead[r] == 0);
    } else {
      CHECK(ahead[r] > 1);
      CHECK(ahead[r] <= tau);
    }
    CHECK(missing[r] == 0);
  }
  CHECK(double(x[0][0]) + x[1][0] + x[2][0] == 4.75);
  CHECK(double(x[0][1]) + x[1][1] + x[2][1] == 9.5);
  CHECK(w[0] + w[1] + w[2] == 3.0);
}
