// --max-send-rate on the ZeroMQ transport, over real loopback sockets, with and without WAN emulation
// (whose delay queue the cap must not bypass): every message still arrives whole, and the bytes the
// sender put on the wire from its first send on stay within what the cap allows over that time (its
// burst, the rate times the time, one chunk). The time counts from before the first send to after the
// last message arrived, so a slow machine only loosens the bound; without the cap loopback sends the
// same bytes hundreds of times faster (tests/peer/send_rate_limit_test.cc checks the bucket itself on
// a clock it drives).
#include <catch2/catch.hpp>

#include <chrono>
#include <thread>

#include "error/error.h"
#include "peer/send_rate_limit.h"
#include "peer/wan_model.h"
#include "peer/zmq/zmq_transport.h"
#include "tests/support/eventually.h"

using namespace meridian::peer;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

ZmqTransportOptions site(const std::string& name, const std::string& wan, std::vector<std::string> bootstrap = {}) {
  ZmqTransportOptions o;
  o.name = name;
  o.insecure = true;
  o.wan = parse_wan_spec(wan);
  o.bootstrap = std::move(bootstrap);
  o.heartbeat_interval = 100ms;
  o.heartbeat_timeout = 10s;  // far above any stall of a loaded machine
  return o;
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

TEST_CASE("a send rate cap holds the bytes a site sends to the rate, and every message still arrives",
          "[peer][wan][cluster]") {
  const auto wan = GENERATE(std::string(), std::string("latency=5ms"));
  INFO("--wan '" << wan << "'");
  constexpr double kBitsPerSecond = 16e6;  // 2 MB/s
  constexpr int kMessages = 8;
  constexpr std::size_t kFloats = 32 * 1024;  // 128 KiB each: 1 MiB in all, half a second at the cap

  ZmqTransport receiver(site("rx", wan));
  auto options = site("tx", wan, {receiver.endpoint()});
  options.max_send_bits_per_s = kBitsPerSecond;
  ZmqTransport sender(std::move(options));
  REQUIRE(meridian::tests::eventually(
      [&] { return sender.alive_members().size() == 2 && receiver.alive_members().size() == 2; }));

  // What went before (hellos, heartbeats) counts against the bucket too, so it cannot let more go now.
  const auto before = sender.stats().bytes_sent;
  const auto start = Clock::now();
  for (int i = 0; i < kMessages; ++i) sender.send("rx", tensor(static_cast<std::uint32_t>(i), kFloats));
  int arrived = 0;
  while (arrived < kMessages) {
    auto m = receiver.receive(30s);
    REQUIRE(m);
    if (m->kind != MessageKind::kReduceChunk) continue;
    CHECK(m->tag == static_cast<std::uint32_t>(arrived));
    CHECK(m->payload.size() == kFloats);
    ++arrived;
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  // The counters are published after each turn of the sender's loop.
  CHECK(meridian::tests::eventually(
      [&] { return sender.stats().bytes_sent - before >= kMessages * kFloats * sizeof(float); }));
  const auto sent = sender.stats().bytes_sent - before;
  const double allowed = SendRateLimit::default_burst_bytes(kBitsPerSecond) + kBitsPerSecond / 8 * seconds +
                         static_cast<double>(kFloats * sizeof(float) + 1024);
  INFO("sent " << sent << " bytes in " << seconds << " s; the cap allows " << allowed);
  CHECK(static_cast<double>(sent) <= allowed);
}

TEST_CASE("a send rate cap that is not a rate is refused by the transport", "[peer][unit]") {
  auto options = site("tx", "");
  options.max_send_bits_per_s = -1;
  CHECK_THROWS_AS(ZmqTransport(std::move(options)), meridian::error::UserError);
}
