#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "peer/delay_queue.h"
#include "peer/link_emulator.h"

using namespace meridian::peer;
using namespace std::chrono_literals;
using Clock = LinkEmulator::Clock;

namespace {

// A fixed origin for the fake clock: the emulator only ever sees times passed in.
const Clock::time_point t0 = Clock::time_point{} + 1000s;

Clock::time_point deliver(LinkEmulator& em, const std::string& to, const LinkSpec& link, std::size_t bytes,
                          Clock::time_point now) {
  const auto when = em.schedule(to, link, bytes, now);
  REQUIRE(when);
  return *when;
}

}  // namespace

TEST_CASE("link emulator: latency alone delays every message by exactly the latency", "[peer][wan][emulator][unit]") {
  LinkEmulator em(1);
  const LinkSpec link = parse_link_spec("latency=120ms");
  CHECK(deliver(em, "b", link, 1 << 20, t0) == t0 + 120ms);
  // No bandwidth limit: a second message at the same instant is not held back by the first.
  CHECK(deliver(em, "b", link, 1 << 20, t0) == t0 + 120ms);
  CHECK(deliver(em, "b", link, 10, t0 + 5ms) == t0 + 125ms);
  CHECK(deliver(em, "c", LinkSpec{}, 10, t0 + 7ms) == t0 + 7ms);
}

TEST_CASE("link emulator: bandwidth adds serialization delay and queues messages behind each other",
          "[peer][wan][emulator][unit]") {
  LinkEmulator em(1);
  const LinkSpec link = parse_link_spec("latency=50ms,bandwidth=10mbit");
  // 1250 bytes = 10,000 bits = 1 ms at 10 Mbit/s; 1,250,000 bytes = 1 s.
  CHECK(deliver(em, "b", link, 1250, t0) == t0 + 1ms + 50ms);
  // Sent while the first still occupies the link (until t0 + 1 ms): leaves after it.
  CHECK(deliver(em, "b", link, 1250, t0) == t0 + 2ms + 50ms);
  CHECK(deliver(em, "b", link, 1'250'000, t0 + 500us) == t0 + 2ms + 1s + 50ms);
  // Another destination is another link: not queued behind "b".
  CHECK(deliver(em, "c", link, 1250, t0) == t0 + 1ms + 50ms);
  // Once the link is idle again, a message starts at once.
  CHECK(deliver(em, "b", link, 125, t0 + 10s) == t0 + 10s + 100us + 50ms);
  CHECK(deliver(em, "b", link, 0, t0 + 20s) == t0 + 20s + 50ms);
}

TEST_CASE("link emulator: jitter spreads delays but never reorders a link", "[peer][wan][emulator][unit]") {
  LinkEmulator em(7);
  const LinkSpec link = parse_link_spec("latency=10ms,jitter=8ms");
  SECTION("sparse messages see latency +- jitter") {
    Clock::duration lo = Clock::duration::max(), hi = Clock::duration::min();
    double sum_ms = 0;
    const int n = 2000;
    for (int i = 0; i < n; ++i) {
      const auto sent = t0 + i * 1s;  // far apart: FIFO never holds one back
      const auto d = deliver(em, "b", link, 100, sent) - sent;
      lo = std::min(lo, d);
      hi = std::max(hi, d);
      sum_ms += std::chrono::duration<double, std::milli>(d).count();
    }
    CHECK(lo >= 2ms);
    CHECK(hi <= 18ms);
    CHECK(lo < 3ms);  // the draws really cover the range
    CHECK(hi > 17ms);
    CHECK(sum_ms / n == Approx(10.0).margin(0.5));  // symmetric around the latency
  }
  SECTION("dense messages stay in order") {
    Clock::time_point previous{};
    int held_back = 0;
    for (int i = 0; i < 2000; ++i) {
      const auto sent = t0 + i * 100us;
      const auto d = deliver(em, "b", link, 100, sent);
      CHECK(d >= previous);
      CHECK(d >= sent + 2ms);
      if (d > sent + 18ms) FAIL("delivered later than latency + jitter though the link is not busy");
      if (d == previous) ++held_back;
      previous = d;
    }
    CHECK(held_back > 100);  // FIFO really had to intervene
  }
  SECTION("jitter larger than latency clamps at zero delay") {
    const LinkSpec wild = parse_link_spec("latency=1ms,jitter=5ms");
    for (int i = 0; i < 200; ++i) {
      const auto sent = t0 + i * 1s;
      CHECK(deliver(em, "x", wild, 1, sent) >= sent);
    }
  }
}

TEST_CASE("link emulator: loss drops the configured fraction, reproducibly for a seed", "[peer][wan][emulator][unit]") {
  const LinkSpec link = parse_link_spec("latency=20ms,loss=0.1");
  auto run = [&](std::uint64_t seed) {
    LinkEmulator em(seed);
    std::vector<bool> lost;
    for (int i = 0; i < 20000; ++i) lost.push_back(!em.schedule("b", link, 100, t0 + i * 1ms));
    CHECK(em.scheduled() == 20000);
    CHECK(em.lost() == static_cast<std::uint64_t>(std::count(lost.begin(), lost.end(), true)));
    return lost;
  };
  const auto a = run(11);
  const double rate = static_cast<double>(std::count(a.begin(), a.end(), true)) / a.size();
  CHECK(rate == Approx(0.1).margin(0.01));  // 0.01 is 4.7 standard deviations of 20000 draws
  CHECK(run(11) == a);
  CHECK(run(12) != a);

  LinkEmulator none(3);
  for (int i = 0; i < 1000; ++i) CHECK(none.schedule("b", parse_link_spec("latency=20ms"), 100, t0 + i * 1ms));
  CHECK(none.lost() == 0);
}

TEST_CASE("link emulator: a lost message still used the link's bandwidth", "[peer][wan][emulator][unit]") {
  // With loss just below 1 nearly every message is lost; find the first one that arrives.
  LinkEmulator em(5);
  const LinkSpec link = parse_link_spec("bandwidth=8kbit,loss=0.999");
  int k = 0;
  std::optional<Clock::time_point> got;
  while (!(got = em.schedule("b", link, 1000, t0)) && k < 100000) ++k;  // 1000 bytes = 1 s each
  REQUIRE(got);
  CHECK(*got == t0 + (k + 1) * 1s);
  em.forget("b");
  CHECK(em.schedule("b", parse_link_spec("bandwidth=8kbit"), 1000, t0) == t0 + 1s);
}

TEST_CASE("delay queue hands back items in due order, ties in push order", "[peer][wan][delay_queue][unit]") {
  DelayQueue<int> q;
  CHECK(q.empty());
  CHECK_FALSE(q.next_due());
  CHECK_FALSE(q.time_until_due(t0));
  q.push(t0 + 30ms, 3);
  q.push(t0 + 10ms, 1);
  q.push(t0 + 30ms, 4);
  q.push(t0 + 20ms, 2);
  CHECK(q.size() == 4);
  CHECK(q.next_due() == t0 + 10ms);
  CHECK(q.time_until_due(t0) == 10ms);
  CHECK(q.time_until_due(t0 + 15ms) == Clock::duration::zero());
  CHECK_FALSE(q.pop_due(t0 + 9ms));
  CHECK(q.pop_due(t0 + 25ms) == 1);
  CHECK(q.pop_due(t0 + 25ms) == 2);
  CHECK_FALSE(q.pop_due(t0 + 25ms));
  CHECK(q.pop_due(t0 + 30ms) == 3);
  CHECK(q.pop_due(t0 + 30ms) == 4);
  CHECK(q.empty());
}

TEST_CASE("emulator and delay queue together keep per-link FIFO in a polling loop", "[peer][wan][delay_queue][unit]") {
  // A transport's send path with a fake clock: schedule, park in the queue, send when due.
  LinkEmulator em(9);
  const LinkSpec link = parse_link_spec("latency=30ms,jitter=25ms,bandwidth=100mbit");
  struct Outgoing {
    std::string to;
    int seq;
  };
  DelayQueue<Outgoing> q;
  int seq_b = 0, seq_c = 0;
  for (int i = 0; i < 3000; ++i) {
    const auto now = t0 + i * 50us;
    const std::string to = i % 3 == 0 ? "c" : "b";
    const int seq = to == "b" ? seq_b++ : seq_c++;
    if (auto due = em.schedule(to, link, 1500, now)) q.push(*due, Outgoing{to, seq});
  }
  int next_b = 0, next_c = 0;
  Clock::time_point now = t0;
  while (auto due = q.next_due()) {
    now = *due;
    while (auto out = q.pop_due(now)) {
      int& expected = out->to == "b" ? next_b : next_c;
      CHECK(out->seq == expected);
      ++expected;
    }
  }
  CHECK(next_b == seq_b);
  CHECK(next_c == seq_c);
}
