// WAN emulation on the ZeroMQ transport's send path, measured over real loopback sockets: delivered
// one-way delay and throughput must match the configured link within 10%.
#include <catch2/catch.hpp>

#include <algorithm>
#include <thread>

#include "peer/zmq_transport.h"

using namespace meridian::peer;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

ZmqTransportOptions site(const std::string& name, const std::string& region, const WanModel& wan,
                         std::vector<std::string> bootstrap = {}) {
  ZmqTransportOptions o;
  o.name = name;
  o.insecure = true;
  o.region = region;
  o.wan = wan;
  o.bootstrap = std::move(bootstrap);
  o.heartbeat_interval = 100ms;
  o.heartbeat_timeout = 2000ms;  // well above the emulated latencies
  return o;
}

bool both_know_each_other(const ZmqTransport& a, const ZmqTransport& b) {
  const auto deadline = Clock::now() + 30s;  // hang guard
  while (Clock::now() < deadline) {
    if (a.alive_members().size() == 2 && b.alive_members().size() == 2) return true;
    std::this_thread::sleep_for(5ms);
  }
  return false;
}

Message tensor(std::uint32_t tag, std::size_t n) {
  Message m;
  m.kind = MessageKind::kReduceChunk;
  m.tag = tag;
  m.total = n;
  m.payload.assign(n, 1.0f);
  return m;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

TEST_CASE("emulated one-way delay between world4 regions matches the matrix within 10%", "[peer][wan]") {
  const WanModel wan = parse_wan_spec("world4,jitter=5ms");
  ZmqTransport tokyo(site("tk", "tokyo", wan));
  ZmqTransport oregon(site("or", "oregon", wan, {tokyo.endpoint()}));
  REQUIRE(both_know_each_other(tokyo, oregon));

  // Oregon -> Tokyo is 100 ms one way (± 5 ms jitter). Messages spaced so none waits for another.
  constexpr int kMessages = 15;
  std::vector<Clock::time_point> sent(kMessages);
  std::vector<double> delay_ms;
  std::thread receiver([&] {
    for (int i = 0; i < kMessages; ++i) {
      auto m = tokyo.receive(30s);
      if (!m) return;
      const auto at = Clock::now();
      delay_ms.push_back(std::chrono::duration<double, std::milli>(at - sent[m->tag]).count());
    }
  });
  for (int i = 0; i < kMessages; ++i) {
    sent[i] = Clock::now();
    oregon.send("tk", tensor(static_cast<std::uint32_t>(i), 16));
    std::this_thread::sleep_for(20ms);
  }
  receiver.join();
  REQUIRE(delay_ms.size() == kMessages);
  const double m = median(delay_ms);
  INFO("median one-way delay " << m << " ms, configured 100 ms");
  CHECK(m >= 90.0);
  CHECK(m <= 110.0);
  CHECK(*std::min_element(delay_ms.begin(), delay_ms.end()) >= 95.0 - 1.0);  // never below latency - jitter

  // Heartbeats measure the round trip (100 ms each way here) without synchronized clocks.
  auto rtt_of = [](const ZmqTransport& t, const std::string& peer) -> std::optional<double> {
    for (const auto& m : t.members())
      if (m.record.name == peer && m.rtt) return std::chrono::duration<double, std::milli>(*m.rtt).count();
    return std::nullopt;
  };
  const auto deadline = Clock::now() + 30s;  // hang guard
  while (!rtt_of(oregon, "tk") && Clock::now() < deadline) std::this_thread::sleep_for(10ms);
  const auto rtt = rtt_of(oregon, "tk");
  REQUIRE(rtt);
  INFO("heartbeat round trip " << *rtt << " ms, emulated 200 ms");
  CHECK(*rtt >= 180.0);
  CHECK(*rtt <= 220.0);
}

TEST_CASE("emulated bandwidth limits delivered throughput within 10%", "[peer][wan]") {
  const WanModel wan = parse_wan_spec("latency=20ms,bandwidth=40mbit");
  ZmqTransport a(site("a", "", wan));
  ZmqTransport b(site("b", "", wan, {a.endpoint()}));
  REQUIRE(both_know_each_other(a, b));

  // 12 messages of 250 kB sent back to back: at 40 Mbit/s each takes 50 ms to serialize, so they
  // arrive 50 ms apart whatever the loopback could do.
  constexpr int kMessages = 12;
  constexpr std::size_t kFloats = 62'500;
  for (int i = 0; i < kMessages; ++i) b.send("a", tensor(static_cast<std::uint32_t>(i), kFloats));
  std::vector<Clock::time_point> arrived;
  std::size_t bytes_after_first = 0;
  for (int i = 0; i < kMessages; ++i) {
    auto m = a.receive(30s);
    REQUIRE(m);
    arrived.push_back(Clock::now());
    if (i > 0) bytes_after_first += m->payload.size() * sizeof(float);
    a.recycle(std::move(m->payload));
  }
  const double secs = std::chrono::duration<double>(arrived.back() - arrived.front()).count();
  const double mbit_per_s = bytes_after_first * 8 / secs / 1e6;
  INFO("delivered " << mbit_per_s << " Mbit/s, configured 40 Mbit/s");
  CHECK(mbit_per_s >= 36.0);
  CHECK(mbit_per_s <= 44.0);
}

TEST_CASE("emulated loss drops whole messages and the rest still arrive in order", "[peer][wan]") {
  const WanModel wan = parse_wan_spec("latency=1ms,loss=0.5");
  ZmqTransport a(site("a", "", wan));
  ZmqTransport b(site("b", "", wan, {a.endpoint()}));
  // Heartbeats are lost too; a 2 s timeout at 100 ms intervals tolerates that (0.5^20).
  REQUIRE(both_know_each_other(a, b));
  for (std::uint32_t i = 0; i < 200; ++i) b.send("a", tensor(i, 4));
  std::vector<std::uint32_t> tags;
  while (auto m = a.receive(500ms)) tags.push_back(m->tag);
  INFO(tags.size() << " of 200 arrived");
  CHECK(tags.size() > 50);
  CHECK(tags.size() < 150);
  CHECK(std::is_sorted(tags.begin(), tags.end()));
  CHECK(b.stats().emulated_lost > 0);
}
