// WAN emulation on the ZeroMQ transport's send path, over real loopback sockets. The emulated schedule
// is checked exactly through ZmqTransportOptions::on_emulated_send (the delay and serialization time
// each message is given), not by timing deliveries, which a loaded machine stretches at will; real
// deliveries are only checked not to come before their emulated time.
#include <catch2/catch.hpp>

#include <algorithm>
#include <functional>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include "peer/zmq/zmq_transport.h"
#include "tests/support/eventually.h"

using namespace meridian::peer;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

// Everything one transport's emulation scheduled, as the hook reports it from the I/O thread.
class SendLog {
 public:
  void record(const EmulatedSend& s) {
    std::lock_guard lock(mu_);
    sends_.push_back(s);
  }
  // The sends to `to` in the order they entered that link; only mixer messages when `mixer_only`.
  std::vector<EmulatedSend> to(const std::string& to, bool mixer_only) const {
    std::lock_guard lock(mu_);
    std::vector<EmulatedSend> out;
    for (const auto& s : sends_)
      if (s.to == to && (!mixer_only || is_mixer_kind(s.kind))) out.push_back(s);
    return out;
  }

 private:
  mutable std::mutex mu_;
  std::vector<EmulatedSend> sends_;
};

ZmqTransportOptions site(const std::string& name, const std::string& region, const WanModel& wan,
                         std::vector<std::string> bootstrap = {}, SendLog* log = nullptr) {
  ZmqTransportOptions o;
  o.name = name;
  o.insecure = true;
  o.region = region;
  o.wan = wan;
  o.bootstrap = std::move(bootstrap);
  o.heartbeat_interval = 100ms;
  // Far above the emulated latencies and any stall of a loaded machine: no member is declared dead.
  o.heartbeat_timeout = 10s;
  if (log) o.on_emulated_send = [log](const EmulatedSend& s) { log->record(s); };
  return o;
}

using meridian::tests::eventually;

bool both_know_each_other(const ZmqTransport& a, const ZmqTransport& b) {
  return eventually([&] { return a.alive_members().size() == 2 && b.alive_members().size() == 2; });
}

Message tensor(std::uint32_t tag, std::size_t n) {
  Message m;
  m.kind = MessageKind::kReduceChunk;
  m.tag = tag;
  m.total = n;
  m.payload.assign(n, 1.0f);
  return m;
}

}  // namespace

TEST_CASE("emulated one-way delay between world4 regions follows the matrix and its jitter", "[peer][wan][cluster]") {
  const WanModel wan = parse_wan_spec("world4,jitter=5ms");
  SendLog tokyo_log, oregon_log;
  ZmqTransport tokyo(site("tk", "tokyo", wan, {}, &tokyo_log));
  ZmqTransport oregon(site("or", "oregon", wan, {tokyo.endpoint()}, &oregon_log));
  REQUIRE(both_know_each_other(tokyo, oregon));

  // Oregon <-> Tokyo is 100 ms one way, each message ± 5 ms, and no bandwidth limit: every message
  // (membership included) is due 95..105 ms after it starts on the link, which is when it was handed
  // over or, if later, when the message before it was. FIFO order can only hold a message back to the
  // previous one's due time, which is within the same bounds of an earlier start.
  constexpr int kMessages = 15;
  std::vector<Clock::time_point> arrived(kMessages);
  std::thread receiver([&] {
    for (int i = 0; i < kMessages; ++i) {
      auto m = tokyo.receive(30s);
      if (!m) return;
      if (m->tag < kMessages) arrived[m->tag] = Clock::now();
    }
  });
  for (int i = 0; i < kMessages; ++i) {
    oregon.send("tk", tensor(static_cast<std::uint32_t>(i), 16));
    std::this_thread::sleep_for(20ms);
  }
  receiver.join();
  // Some heartbeats each way, so both directions' links are seen.
  REQUIRE(eventually([&] { return tokyo_log.to("or", false).size() >= 3; }));

  const auto tensors = oregon_log.to("tk", true);
  REQUIRE(tensors.size() == kMessages);
  for (const auto* log : {&oregon_log, &tokyo_log}) {
    const auto sends = log->to(log == &oregon_log ? "tk" : "or", false);
    std::set<Clock::duration> delays;
    std::optional<Clock::time_point> previous_start;
    for (const auto& s : sends) {
      const auto start = previous_start ? std::max(s.enqueued, *previous_start) : s.enqueued;
      previous_start = start;
      const auto delay = s.due - start;
      const double delay_ms = std::chrono::duration<double, std::milli>(delay).count();
      INFO("kind " << static_cast<int>(s.kind) << " to " << s.to << " due after " << delay_ms << " ms");
      CHECK(delay >= 95ms);
      CHECK(delay <= 105ms);
      delays.insert(delay);
    }
    CHECK(delays.size() > 1);  // the jitter is drawn per message
  }
  // The loose check on real delivery: never before the emulated time.
  for (int i = 0; i < kMessages; ++i) {
    INFO("message " << i);
    CHECK(arrived[i] >= tensors[i].due);
  }

  // Heartbeats measure the round trip (the emulated delay both ways) without synchronized clocks; it
  // cannot be shorter than the emulation makes it.
  auto rtt_of = [](const ZmqTransport& t, const std::string& peer) -> std::optional<double> {
    for (const auto& m : t.members())
      if (m.record.name == peer && m.rtt) return std::chrono::duration<double, std::milli>(*m.rtt).count();
    return std::nullopt;
  };
  REQUIRE(eventually([&] { return rtt_of(oregon, "tk").has_value(); }));
  INFO("heartbeat round trip " << *rtt_of(oregon, "tk") << " ms, emulated 190..210 ms");
  CHECK(*rtt_of(oregon, "tk") >= 190.0);
}

TEST_CASE("emulated bandwidth spaces messages by their serialization time", "[peer][wan][cluster]") {
  const WanModel wan = parse_wan_spec("latency=20ms,bandwidth=40mbit");
  SendLog log;
  ZmqTransport a(site("a", "", wan));
  ZmqTransport b(site("b", "", wan, {a.endpoint()}, &log));
  REQUIRE(both_know_each_other(a, b));

  // 12 messages of 250 kB sent back to back: at 40 Mbit/s each takes 50 ms to serialize, so each
  // leaves the link when the one before it has, whatever the loopback could do.
  constexpr int kMessages = 12;
  constexpr std::size_t kFloats = 62'500;
  for (int i = 0; i < kMessages; ++i) b.send("a", tensor(static_cast<std::uint32_t>(i), kFloats));
  std::vector<Clock::time_point> arrived;
  for (int i = 0; i < kMessages; ++i) {
    auto m = a.receive(30s);
    REQUIRE(m);
    REQUIRE(m->tag == static_cast<std::uint32_t>(i));
    arrived.push_back(Clock::now());
    a.recycle(std::move(m->payload));
  }

  // The link's schedule, message by message (heartbeats share it): a message starts serializing when
  // it is handed over or when the one before it is through, whichever is later, takes bytes * 8 / 40e6
  // s, and is delivered 20 ms after that. With no jitter, its departure is its due time - 20 ms.
  const auto serialization = [](std::size_t bytes) {
    return std::chrono::round<Clock::duration>(std::chrono::duration<double>(bytes * 8.0 / 40e6));
  };
  const auto sends = log.to("a", false);
  std::optional<Clock::time_point> previous_departure;
  int tensors = 0;
  for (const auto& s : sends) {
    const auto start = previous_departure ? std::max(s.enqueued, *previous_departure) : s.enqueued;
    INFO("kind " << static_cast<int>(s.kind) << ", " << s.bytes << " bytes");
    CHECK(s.due - (start + serialization(s.bytes)) == 20ms);
    previous_departure = s.due - 20ms;
    if (is_mixer_kind(s.kind)) {
      CHECK(s.bytes > kFloats * sizeof(float));
      CHECK(serialization(s.bytes) >= 50ms);
      // The loose check on real delivery: never before the emulated time.
      CHECK(arrived.at(tensors) >= s.due);
      ++tensors;
    }
  }
  CHECK(tensors == kMessages);
  // Back to back: the later messages waited for the link, so they are due a serialization time apart.
  const auto mixer = log.to("a", true);
  REQUIRE(mixer.size() == kMessages);
  CHECK(mixer.back().due - mixer.front().due >= (kMessages - 1) * 50ms);
}

TEST_CASE("emulated loss drops whole messages and the rest still arrive in order", "[peer][wan][cluster]") {
  const WanModel wan = parse_wan_spec("latency=1ms,loss=0.5");
  SendLog log;
  ZmqTransport a(site("a", "", wan));
  ZmqTransport b(site("b", "", wan, {a.endpoint()}, &log));
  // Membership traffic is never lost (as a TCP stream would deliver it), so the sites still meet.
  REQUIRE(both_know_each_other(a, b));
  for (std::uint32_t i = 0; i < 200; ++i) b.send("a", tensor(i, 4));
  // Every message is either lost or scheduled; the scheduled ones all arrive.
  REQUIRE(eventually([&] { return b.stats().emulated_lost + log.to("a", true).size() == 200; }));
  const auto lost = b.stats().emulated_lost;
  INFO(lost << " of 200 lost");
  CHECK(lost > 50);
  CHECK(lost < 150);
  std::vector<std::uint32_t> tags;
  while (tags.size() < 200 - lost) {
    auto m = a.receive(30s);
    REQUIRE(m);
    tags.push_back(m->tag);
  }
  CHECK(std::is_sorted(tags.begin(), tags.end()));
  CHECK(std::adjacent_find(tags.begin(), tags.end()) == tags.end());
  CHECK_FALSE(a.receive(100ms));
}
