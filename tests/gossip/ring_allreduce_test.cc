#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <random>
#include <thread>

#include "error/error.h"
#include "gossip/inbox.h"
#include "gossip/ring_allreduce.h"
#include "peer/in_memory_transport.h"
#include "site_cluster.h"

using namespace meridian;
using namespace meridian::gossip;
using namespace std::chrono_literals;

namespace {

std::vector<std::vector<float>> random_inputs(std::size_t sites, std::size_t size, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<std::vector<float>> in(sites, std::vector<float>(size));
  for (auto& v : in)
    for (auto& x : v) x = dist(rng);
  return in;
}

// Runs one ring all-reduce on every site of `group` (a sub-list of the network's sites is allowed)
// and returns each member's result.
std::vector<std::vector<float>> reduce_on_threads(const std::vector<std::string>& all,
                                                  const std::vector<std::string>& group,
                                                  std::vector<std::vector<float>> data, const RingOptions& options,
                                                  std::vector<RoundStatus>& status) {
  auto net = peer::InMemoryNetwork::create(all);
  status.assign(group.size(), RoundStatus::kAbandoned);
  std::vector<std::thread> threads;
  for (std::size_t r = 0; r < group.size(); ++r)
    threads.emplace_back([&, r] {
      auto transport = net->endpoint(group[r]);
      Inbox inbox(*transport);
      RingAllReduce ring(inbox);
      status[r] = ring.run(group, Round{0, 7, 0}, data[r], Clock::now() + 60s, options);
    });
  for (auto& t : threads) t.join();
  return data;
}

}  // namespace

TEST_CASE("ring all-reduce sums exactly enough and leaves every site bit-identical", "[gossip][ring][cluster]") {
  for (std::size_t n = 1; n <= 16; ++n) {
    for (std::size_t size : {std::size_t{0}, std::size_t{1}, std::size_t{2}, std::size_t{13}, std::size_t{97}}) {
      for (std::size_t piece : {std::size_t{4}, RingOptions{}.max_piece}) {
        auto in = random_inputs(n, size, static_cast<unsigned>(n * 1000 + size));
        RingOptions options;
        options.max_piece = piece;
        std::vector<RoundStatus> status;
        auto names = testing::site_names(n);
        auto out = reduce_on_threads(names, names, in, options, status);
        INFO("n=" << n << " size=" << size << " piece=" << piece);
        for (auto s : status) REQUIRE(s == RoundStatus::kCompleted);
        for (std::size_t i = 0; i < size; ++i) {
          double exact = 0, magnitude = 0;
          for (std::size_t j = 0; j < n; ++j) {
            exact += in[j][i];
            magnitude += std::abs(in[j][i]);
          }
          REQUIRE(std::abs(out[0][i] - exact) <= 1e-6 * magnitude * static_cast<double>(n) + 1e-30);
        }
        for (std::size_t j = 1; size > 0 && j < n; ++j)
          REQUIRE(std::memcmp(out[j].data(), out[0].data(), size * sizeof(float)) == 0);
      }
    }
  }
}

TEST_CASE("ring all-reduce of a million-plus floats that do not divide evenly", "[gossip][ring][cluster]") {
  const std::size_t n = 7, size = 1'000'003;  // prime size: every segment and piece boundary is uneven
  auto in = random_inputs(n, size, 42);
  RingOptions options;
  options.average = true;
  options.max_piece = 100'000;
  std::vector<RoundStatus> status;
  auto names = testing::site_names(n);
  auto out = reduce_on_threads(names, names, in, options, status);
  for (auto s : status) REQUIRE(s == RoundStatus::kCompleted);
  double worst = 0;
  for (std::size_t i = 0; i < size; ++i) {
    double exact = 0;
    for (std::size_t j = 0; j < n; ++j) exact += in[j][i];
    worst = std::max(worst, std::abs(out[3][i] - exact / n));
  }
  CHECK(worst <= 1e-6);
  for (std::size_t j = 1; j < n; ++j) CHECK(std::memcmp(out[j].data(), out[0].data(), size * sizeof(float)) == 0);
}

TEST_CASE("ring all-reduce runs over any sub-group in any ring order", "[gossip][ring][cluster]") {
  auto names = testing::site_names(6);
  std::vector<std::string> group = {names[4], names[1], names[5]};
  auto in = random_inputs(3, 11, 5);
  std::vector<RoundStatus> status;
  auto out = reduce_on_threads(names, group, in, RingOptions{}, status);
  for (std::size_t i = 0; i < 11; ++i) CHECK(out[1][i] == Approx(in[0][i] + in[1][i] + in[2][i]).margin(1e-6));
  CHECK(std::memcmp(out[0].data(), out[2].data(), 11 * sizeof(float)) == 0);
}

TEST_CASE("ring all-reduce abandons a round at its deadline when a member is dead", "[gossip][ring][faults][cluster]") {
  auto names = testing::site_names(4);
  auto net = peer::InMemoryNetwork::create(names);
  net->kill(names[2]);
  std::vector<RoundStatus> status(3, RoundStatus::kCompleted);
  std::vector<std::thread> threads;
  for (std::size_t r : {0u, 1u, 3u})
    threads.emplace_back([&, r] {
      auto transport = net->endpoint(names[r]);
      Inbox inbox(*transport);
      RingAllReduce ring(inbox);
      std::vector<float> data(10, 1.0f);
      status[r == 3 ? 2 : r] = ring.run(names, Round{0, 0, 0}, data, Clock::now() + 100ms);
    });
  for (auto& t : threads) t.join();
  for (auto s : status) CHECK(s == RoundStatus::kAbandoned);
}

TEST_CASE("ring all-reduce rejects a piece of the wrong size without touching the data", "[gossip][ring][cluster]") {
  auto names = testing::site_names(2);
  auto net = peer::InMemoryNetwork::create(names);
  auto a = net->endpoint(names[0]);
  auto b = net->endpoint(names[1]);
  peer::Message bad;
  bad.kind = peer::MessageKind::kReduceChunk;
  bad.round = 0;
  bad.phase = 0;
  bad.offset = 2;  // site01 sends its segment 1 = [2, 4) first
  bad.total = 4;
  bad.payload = {1.0f, 2.0f, 3.0f};
  b->send(names[0], bad);
  Inbox inbox(*a);
  RingAllReduce ring(inbox);
  std::vector<float> data(4, 1.0f);
  CHECK(ring.run(names, Round{0, 0, 0}, data, Clock::now() + 50ms) == RoundStatus::kAbandoned);
  CHECK(ring.rejected() == 1);
  CHECK_THROWS_AS(ring.run({names[1]}, Round{}, data, Clock::now()), meridian::error::InternalError);
}

TEST_CASE("the inbox hands out matching mail in order and bounds what nobody asks for", "[gossip][cluster]") {
  auto names = testing::site_names(2);
  auto net = peer::InMemoryNetwork::create(names);
  auto a = net->endpoint(names[0]);
  auto b = net->endpoint(names[1]);
  for (std::uint64_t r = 0; r < 4; ++r) {
    peer::Message m;
    m.kind = peer::MessageKind::kPushSum;
    m.round = r;
    b->send(names[0], std::move(m));
  }
  Inbox inbox(*a);
  auto third = inbox.take([](const peer::Message& m) { return m.round == 2; }, Clock::now() + 1s);
  REQUIRE(third);
  CHECK(inbox.stashed() == 2);  // rounds 0 and 1 waited in the stash; round 3 is still in the transport
  CHECK(inbox.pump(0ms) == 1);
  CHECK(inbox.discard_if([](const peer::Message& m) { return m.round == 0; }) == 1);
  auto rest = inbox.take_all([](const peer::Message&) { return true; });
  REQUIRE(rest.size() == 2);
  CHECK(rest[0].round == 1);
  CHECK(rest[1].round == 3);
  CHECK_FALSE(inbox.take([](const peer::Message&) { return true; }, Clock::now() + 10ms));
  for (std::size_t i = 0; i < Inbox::kMaxStashed + 5; ++i) {
    peer::Message m;
    m.kind = peer::MessageKind::kPushSum;
    m.round = 100 + i;
    b->send(names[0], std::move(m));
  }
  inbox.pump(0ms);
  CHECK(inbox.stashed() == Inbox::kMaxStashed);
  CHECK(inbox.overflowed() == 5);
}
