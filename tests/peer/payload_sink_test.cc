// PayloadSink::apply: the fused read-check-combine that receive_into() uses, against the plain
// expression it replaces, and its refusal of non-finite payloads.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "error/error.h"
#include "peer/in_memory_transport.h"
#include "peer/payload_sink.h"

using namespace meridian::peer;
using namespace std::chrono_literals;

namespace {

std::vector<float> random_floats(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-10.0f, 10.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

std::span<const std::byte> bytes(const std::vector<float>& v) { return std::as_bytes(std::span<const float>(v)); }

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

}  // namespace

TEST_CASE("a payload sink computes exactly (payload + addend) * scale in every shape", "[peer][sink][unit]") {
  for (std::size_t n : {0u, 1u, 1023u, 1024u, 1025u, 4099u}) {
    INFO("n = " << n);
    const auto payload = random_floats(n, 1);
    const auto own = random_floats(n, 2);
    const float scale = 0.25f;

    std::vector<float> out(n, -1.0f), also(n, -1.0f);
    PayloadSink copy{nullptr, n, out, {}, 1.0f, {}};
    REQUIRE(copy.apply(bytes(payload), also));
    CHECK(same_bits(out, payload));
    CHECK(same_bits(also, payload));

    std::vector<float> want(n);
    for (std::size_t i = 0; i < n; ++i) want[i] = payload[i] + own[i];
    PayloadSink add{nullptr, n, out, own, 1.0f, {}};
    REQUIRE(add.apply(bytes(payload)));
    CHECK(same_bits(out, want));

    // The result written over the payload's own memory, no other output (a relayed partial sum).
    std::vector<float> relayed = payload;
    PayloadSink relay_only{nullptr, n, {}, own, 1.0f, {}};
    REQUIRE(relay_only.apply(bytes(relayed), relayed));
    CHECK(same_bits(relayed, want));

    for (std::size_t i = 0; i < n; ++i) want[i] = (payload[i] + own[i]) * scale;
    std::vector<float> in_place = own;
    PayloadSink averaged{nullptr, n, in_place, in_place, scale, {}};
    REQUIRE(averaged.apply(bytes(payload), also));
    CHECK(same_bits(in_place, want));
    CHECK(same_bits(also, want));
  }
}

// A network buffer puts no alignment promise on a payload: every shape reads it at any byte offset.
TEST_CASE("a payload sink reads payloads at any byte offset", "[peer][sink][unit]") {
  const std::size_t n = 3001;
  const auto payload = random_floats(n, 4);
  const auto own = random_floats(n, 5);
  std::vector<float> want(n);
  for (std::size_t i = 0; i < n; ++i) want[i] = (payload[i] + own[i]) * 0.5f;
  for (std::size_t offset : {1u, 2u, 3u}) {
    INFO("offset " << offset);
    std::vector<std::byte> buffer(offset + n * sizeof(float));
    std::memcpy(buffer.data() + offset, payload.data(), n * sizeof(float));
    const std::span<const std::byte> unaligned(buffer.data() + offset, n * sizeof(float));
    std::vector<float> out(n, -1.0f), also(n, -1.0f);
    PayloadSink copy{nullptr, n, out, {}, 1.0f, {}};
    REQUIRE(copy.apply(unaligned, also));
    CHECK(same_bits(out, payload));
    CHECK(same_bits(also, payload));
    PayloadSink averaged{nullptr, n, out, own, 0.5f, {}};
    REQUIRE(averaged.apply(unaligned));
    CHECK(same_bits(out, want));
  }
}

TEST_CASE("a payload sink refuses a non-finite payload and never writes the bad value", "[peer][sink][unit]") {
  const std::size_t n = 5000;
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                    -std::numeric_limits<float>::infinity()}) {
    for (std::size_t at : {std::size_t{0}, std::size_t{1500}, n - 1}) {
      INFO("bad value at " << at);
      auto payload = random_floats(n, 3);
      payload[at] = bad;
      std::vector<float> data(n, 1.0f), also(n, 1.0f);
      PayloadSink sink{nullptr, n, data, data, 0.5f, {}};
      CHECK_FALSE(sink.apply(bytes(payload), also));
      for (std::size_t i = 0; i < n; ++i) {
        REQUIRE(std::isfinite(data[i]));
        REQUIRE(std::isfinite(also[i]));
      }
      CHECK(data.back() == 1.0f);  // the block holding the bad value and the rest stay untouched
    }
  }
  std::vector<float> out(3);
  PayloadSink sink{nullptr, 3, out, {}, 1.0f, {}};
  std::vector<float> wrong(4);
  CHECK_THROWS_AS((void)sink.apply(bytes(wrong)), meridian::error::PeerError);
}

TEST_CASE("the default receive_into applies accepted payloads and hands back the rest", "[peer][sink][cluster]") {
  auto net = InMemoryNetwork::create({"a", "b"});
  auto a = net->endpoint("a");
  auto b = net->endpoint("b");
  auto message = [](std::uint32_t phase, std::vector<float> payload) {
    Message m;
    m.kind = MessageKind::kReduceChunk;
    m.phase = phase;
    m.total = payload.size();
    m.payload = std::move(payload);
    return m;
  };
  b->send("a", message(1, {1.0f, 2.0f}));
  b->send("a", message(0, {1.0f, std::nanf("")}));
  b->send("a", message(0, {3.0f, 4.0f, 5.0f}));
  b->send("a", message(0, {3.0f, 4.0f}));
  std::vector<float> out{10.0f, 20.0f};
  PayloadSink sink{[](const Message& m) { return m.phase == 0; }, 2, out, out, 1.0f, {}};

  auto other = a->receive_into(sink, 1s);  // not for this sink: comes back with its payload
  REQUIRE(other);
  CHECK_FALSE(other->sunk);
  CHECK(other->msg.payload == std::vector<float>{1.0f, 2.0f});
  auto nan = a->receive_into(sink, 1s);  // accepted but not finite: refused, data intact
  REQUIRE(nan);
  CHECK_FALSE(nan->sunk);
  CHECK(out == std::vector<float>{10.0f, 20.0f});
  auto longer = a->receive_into(sink, 1s);  // the wrong length
  REQUIRE(longer);
  CHECK_FALSE(longer->sunk);
  auto good = a->receive_into(sink, 1s);
  REQUIRE(good);
  CHECK(good->sunk);
  CHECK(good->msg.from == "b");
  CHECK(good->msg.payload.empty());
  CHECK(out == std::vector<float>{13.0f, 24.0f});
  CHECK_FALSE(a->receive_into(sink, 10ms));

  // With a relay, the result also goes on (here back to b) as the payload of the relay's message.
  b->send("a", message(0, {1.0f, 1.0f}));
  sink.relay = PayloadSink::Relay{"b", message(9, {})};
  auto relaying = a->receive_into(sink, 1s);
  REQUIRE(relaying);
  CHECK(relaying->sunk);
  CHECK(out == std::vector<float>{14.0f, 25.0f});
  auto back = b->receive(1s);
  REQUIRE(back);
  CHECK(back->from == "a");
  CHECK(back->phase == 9);
  CHECK(back->payload == out);
}
