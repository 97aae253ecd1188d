// ZmqTransport over real TCP sockets on loopback (ephemeral ports), several sites in one process.
#include <catch2/catch.hpp>

#include <csignal>
#include <cmath>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>
#include <algorithm>
#include <atomic>
#include <functional>
#include <mutex>
#include <numeric>
#include <thread>
#include <zmq.hpp>

#include "peer/wan_model.h"
#include "peer/wire_codec.h"
#include "peer/zmq/zmq_transport.h"
#include "proto/meridian.pb.h"
#include "tests/support/eventually.h"

using namespace meridian::peer;
using namespace std::chrono_literals;

namespace {

constexpr std::uint64_t kFingerprint = 0x5eed;

using meridian::tests::eventually;

// No test here is about death detection, so a member must never be declared dead: a transport's
// I/O thread can be starved for seconds on a loaded machine, and heartbeats still come every 50 ms.
constexpr auto kHeartbeatTimeout = 10s;

struct Federation {
  std::map<std::string, CurveKeyPair> keys;
  Roster roster;
  explicit Federation(const std::vector<std::string>& names) {
    for (const auto& n : names) {
      keys[n] = generate_curve_key_pair();
      roster.add({n, keys[n].public_key, ""});
    }
  }
  ZmqTransportOptions options(const std::string& name, std::vector<std::string> bootstrap = {}) const {
    ZmqTransportOptions o;
    o.name = name;
    o.keys = keys.at(name);
    o.roster = roster;
    o.bootstrap = std::move(bootstrap);
    o.heartbeat_interval = 50ms;
    o.heartbeat_timeout = kHeartbeatTimeout;
    o.validation.model_fingerprint = kFingerprint;
    return o;
  }
};

Message push_sum(std::uint64_t round, std::size_t n, float start = 1.0f) {
  Message m;
  m.kind = MessageKind::kPushSum;
  m.round = round;
  m.total = n;
  m.weight = 0.5;
  m.payload.resize(n);
  std::iota(m.payload.begin(), m.payload.end(), start);
  return m;
}

bool knows_all(const ZmqTransport& t, const std::vector<std::string>& all) { return t.alive_members() == all; }

}  // namespace

TEST_CASE("two secure sites meet from a bootstrap address and exchange tensors intact", "[peer][zmq][cluster]") {
  Federation fed({"a", "b"});
  ZmqTransport a(fed.options("a"));
  REQUIRE(a.endpoint().rfind("tcp://127.0.0.1:", 0) == 0);
  ZmqTransport b(fed.options("b", {"a@" + a.endpoint()}));
  REQUIRE(eventually([&] { return knows_all(a, {"a", "b"}) && knows_all(b, {"a", "b"}); }));

  // 1M floats = 4 MB: several chunks, zero-copy on the way out, reassembled on the way in.
  b.send("a", push_sum(3, 1 << 20));
  b.send("a", push_sum(4, 10, 100.0f));
  auto got = a.receive(30s);
  REQUIRE(got);
  CHECK(got->from == "b");
  CHECK(got->round == 3);
  CHECK(got->weight == 0.5);
  REQUIRE(got->payload.size() == (1u << 20));
  CHECK(got->payload.front() == 1.0f);
  CHECK(got->payload.back() == static_cast<float>(1 << 20));
  CHECK(got->payload == push_sum(3, 1 << 20).payload);
  a.recycle(std::move(got->payload));
  auto second = a.receive(30s);
  REQUIRE(second);
  CHECK(second->round == 4);  // FIFO per pair
  CHECK(second->payload.front() == 100.0f);
  CHECK(a.rejections().total() == 0);
  // Per-peer traffic counters (published by the I/O thread shortly after the message went through).
  auto traffic = [](const ZmqTransport& t, const std::string& peer, bool in) {
    for (const auto& m : t.members())
      if (m.record.name == peer) return in ? m.bytes_in : m.bytes_out;
    return std::uint64_t{0};
  };
  CHECK(eventually([&] { return traffic(a, "b", true) > (4u << 20) && traffic(b, "a", false) > (4u << 20); }));

  // A message to a site nobody knows is dropped and counted, never an exception.
  a.send("nobody", push_sum(5, 1));
  CHECK(eventually([&] { return a.stats().dropped_unreachable == 1; }));
  // Sending to oneself delivers locally.
  a.send("a", push_sum(6, 2));
  auto self = a.receive(10s);
  REQUIRE(self);
  CHECK(self->from == "a");
}

TEST_CASE("three sites agree on members and views; a leave is seen and the view follows", "[peer][zmq][cluster]") {
  Federation fed({"a", "b", "c"});
  ZmqTransport a(fed.options("a"));
  ZmqTransport b(fed.options("b", {"a@" + a.endpoint()}));
  auto c = std::make_unique<ZmqTransport>(fed.options("c", {"a@" + a.endpoint()}));
  const std::vector<std::string> all{"a", "b", "c"};
  REQUIRE(eventually([&] {
    return knows_all(a, all) && knows_all(b, all) && knows_all(*c, all) && a.latest_view().members == all &&
           a.latest_view() == b.latest_view() && b.latest_view() == c->latest_view();
  }));
  const View v = a.latest_view();
  CHECK(a.view_for(v.effective_round) == v);
  CHECK(a.view_for(v.effective_round).rank_of("c") == 2u);

  c->leave();
  CHECK_THROWS_AS(c->send("a", push_sum(1, 1)), TransportError);
  REQUIRE(eventually([&] { return knows_all(a, {"a", "b"}) && knows_all(b, {"a", "b"}); }));
  for (auto* t : {&a, &b}) {
    auto members = t->members();
    auto it = std::find_if(members.begin(), members.end(), [](const MemberStatus& m) { return m.record.name == "c"; });
    REQUIRE(it != members.end());
    CHECK(it->record.state == MemberState::kLeft);
  }
  REQUIRE(eventually([&] {
    return a.latest_view().members == std::vector<std::string>{"a", "b"} && a.latest_view() == b.latest_view();
  }));
  CHECK(a.latest_view().id > v.id);
}

TEST_CASE("a member that a view lists before its own hello has arrived still receives what is sent to it",
          "[peer][zmq][wan][cluster]") {
  // Over world4's links the view that a (Oregon) announces with c (Tokyo) in it reaches b (London)
  // through a in about 235 ms, while c's own hello reaches b only after c has heard of b through a and
  // dialed it: about 510 ms. In between, b holds c as only heard of, and what b's rounds send c must
  // wait for that connection instead of being dropped as sent to a dead site.
  Federation fed({"a", "b", "c"});
  auto options = [&](const std::string& name, const std::string& region, std::vector<std::string> bootstrap) {
    auto o = fed.options(name, std::move(bootstrap));
    o.region = region;
    o.wan = parse_wan_spec("world4");
    return o;
  };
  ZmqTransport a(options("a", "oregon", {}));
  ZmqTransport b(options("b", "london", {"a@" + a.endpoint()}));
  ZmqTransport c(options("c", "tokyo", {"a@" + a.endpoint()}));
  const std::vector<std::string> all{"a", "b", "c"};
  // The send goes out the moment b first holds a view with c, polled every millisecond.
  const auto guard = std::chrono::steady_clock::now() + 30s;
  while (b.latest_view().members != all && std::chrono::steady_clock::now() < guard) std::this_thread::sleep_for(1ms);
  REQUIRE(b.latest_view().members == all);
  const auto alive = b.alive_members();
  INFO("b counts alive, when the view with c arrives: " << alive.size() << " sites");
  b.send("c", push_sum(1, 8));
  std::optional<Message> got;
  REQUIRE(eventually([&] {
    got = c.receive(10ms);
    return got && got->kind == MessageKind::kPushSum;
  }));
  CHECK(got->from == "b");
  CHECK(got->payload == push_sum(1, 8).payload);
  CHECK(b.stats().dropped_unreachable == 0);
}

TEST_CASE("a site whose key is not in the roster cannot deliver a single message", "[peer][zmq][security][cluster]") {
  Federation fed({"a"});
  ZmqTransport a(fed.options("a"));

  // The intruder knows a's public key and speaks the protocol perfectly, with its own key pair.
  const auto intruder = generate_curve_key_pair();
  zmq::context_t ctx;
  zmq::socket_t s(ctx, zmq::socket_type::dealer);
  s.set(zmq::sockopt::linger, 0);
  s.set(zmq::sockopt::curve_serverkey, fed.keys.at("a").public_key);
  s.set(zmq::sockopt::curve_publickey, intruder.public_key);
  s.set(zmq::sockopt::curve_secretkey, intruder.secret_key);
  s.connect(a.endpoint());
  Message hello;
  hello.kind = MessageKind::kHello;
  hello.body = encode_hello(HelloInfo{"a", "tcp://127.0.0.1:1", "", 1, 0, {}, {}});
  for (int i = 0; i < 20; ++i) {
    for (const Message* m : {&hello}) {
      auto chunk = encode_message(*m, kFingerprint, static_cast<std::uint64_t>(i), WireLimits{})[0];
      (void)s.send(zmq::buffer(chunk.header), zmq::send_flags::dontwait);
    }
    Message ps = push_sum(1, 4);
    auto c = encode_message(ps, kFingerprint, 100 + i, WireLimits{})[0];
    (void)s.send(zmq::buffer(c.header), zmq::send_flags::sndmore | zmq::send_flags::dontwait);
    (void)s.send(zmq::buffer(ps.payload.data(), 16), zmq::send_flags::dontwait);
  }
  REQUIRE(eventually([&] { return a.stats().zap_denied >= 1; }));
  CHECK_FALSE(a.receive(200ms));
  CHECK(a.stats().messages_received == 0);
  CHECK(a.rejections().total() == 0);  // nothing even reached validation
  CHECK(a.alive_members() == std::vector<std::string>{"a"});

  // The same attempt from a full ZmqTransport with a roster that (wrongly) includes itself.
  Roster fake = fed.roster;
  fake.add({"x", intruder.public_key, ""});
  ZmqTransportOptions xo;
  xo.name = "x";
  xo.keys = intruder;
  xo.roster = fake;
  xo.bootstrap = {"a@" + a.endpoint()};
  xo.heartbeat_interval = 50ms;
  xo.heartbeat_timeout = kHeartbeatTimeout;
  xo.validation.model_fingerprint = kFingerprint;
  ZmqTransport x(std::move(xo));
  REQUIRE(eventually([&] { return a.stats().zap_denied >= 2; }));
  x.send("a", push_sum(1, 4));
  CHECK_FALSE(a.receive(300ms));
  CHECK(a.stats().messages_received == 0);
  CHECK(a.alive_members() == std::vector<std::string>{"a"});
  CHECK(x.alive_members() == std::vector<std::string>{"x"});
}

TEST_CASE("hostile frames are rejected and counted while the site keeps working", "[peer][zmq][security][cluster]") {
  Federation fed({"a", "m"});
  auto opts = fed.options("a");
  opts.validation.model_elements = 8;
  opts.validation.rounds_behind = 5;
  opts.limits.max_header_bytes = 4096;
  ZmqTransport a(std::move(opts));
  a.set_round(100);

  // "m" is a roster member whose software misbehaves: a raw socket with m's valid key.
  zmq::context_t ctx;
  zmq::socket_t s(ctx, zmq::socket_type::dealer);
  s.set(zmq::sockopt::linger, 0);
  s.set(zmq::sockopt::curve_serverkey, fed.keys.at("a").public_key);
  s.set(zmq::sockopt::curve_publickey, fed.keys.at("m").public_key);
  s.set(zmq::sockopt::curve_secretkey, fed.keys.at("m").secret_key);
  s.connect(a.endpoint());
  std::uint64_t id = 1;
  auto send_frames = [&](const std::vector<std::string>& frames) {
    for (std::size_t i = 0; i < frames.size(); ++i)
      REQUIRE(s.send(zmq::buffer(frames[i]), i + 1 < frames.size() ? zmq::send_flags::sndmore : zmq::send_flags::none));
  };
  auto encoded = [&](const Message& m, std::uint64_t fp = kFingerprint) {
    auto c = encode_message(m, fp, id++, WireLimits{})[0];
    std::vector<std::string> frames{c.header};
    if (c.elements) frames.emplace_back(reinterpret_cast<const char*>(m.payload.data()), c.elements * 4);
    return frames;
  };
  auto expect = [&](RejectCause cause, const std::vector<std::string>& frames) {
    const auto before = a.rejections().count(cause);
    send_frames(frames);
    INFO("cause " << to_string(cause));
    CHECK(eventually([&] { return a.rejections().count(cause) == before + 1; }));
  };

  Message hello;
  hello.kind = MessageKind::kHello;
  hello.body = encode_hello(HelloInfo{"m", "tcp://127.0.0.1:9", "", 1, 100, {}, {}});
  send_frames(encoded(hello));
  REQUIRE(eventually([&] { return knows_all(a, {"a", "m"}); }));

  const auto valid = encoded(push_sum(100, 8));
  auto truncated = valid;
  truncated[1].resize(10);
  expect(RejectCause::kTruncated, truncated);
  expect(RejectCause::kTruncated, {valid[0]});
  expect(RejectCause::kOversized, {std::string(5000, 'x')});
  expect(RejectCause::kMalformed, {std::string("\x0a\xff\xff\xff", 4)});
  expect(RejectCause::kMalformed, {valid[0], valid[1], "extra"});
  {
    meridian::wire::Header h;
    REQUIRE(h.ParseFromString(valid[0]));
    h.set_protocol_version(kProtocolVersion + 7);
    expect(RejectCause::kVersion, {h.SerializeAsString(), valid[1]});
  }
  expect(RejectCause::kFingerprint, encoded(push_sum(100, 8), kFingerprint + 1));
  {
    Message nan = push_sum(100, 8);
    nan.payload[3] = std::nanf("");
    nan.tag = 1;
    expect(RejectCause::kNonFinite, encoded(nan));
  }
  expect(RejectCause::kTensorLength, encoded(push_sum(100, 7)));
  {
    Message heavy = push_sum(100, 8);
    heavy.weight = -2;
    heavy.tag = 2;
    expect(RejectCause::kWeightRange, encoded(heavy));
  }
  expect(RejectCause::kRoundStale, encoded(push_sum(10, 8)));

  // A valid message is accepted once; the identical message again is a replay.
  send_frames(valid);
  auto got = a.receive(30s);
  REQUIRE(got);
  CHECK(got->from == "m");
  CHECK(got->payload == push_sum(100, 8).payload);
  expect(RejectCause::kReplayed, valid);

  // The site still works: the next round's message arrives.
  send_frames(encoded(push_sum(101, 8, 7.0f)));
  auto next = a.receive(30s);
  REQUIRE(next);
  CHECK(next->round == 101);
  CHECK(next->payload.front() == 7.0f);
  CHECK_FALSE(a.receive(50ms));
}

namespace {
// A plain-TCP site with quick heartbeats, for the tests of insecure mode.
ZmqTransportOptions insecure_options(const std::string& name) {
  ZmqTransportOptions o;
  o.name = name;
  o.insecure = true;
  o.heartbeat_interval = 50ms;
  o.heartbeat_timeout = kHeartbeatTimeout;
  return o;
}
}  // namespace

TEST_CASE("insecure mode works over plain TCP and names senders by their hello", "[peer][zmq][cluster]") {
  ZmqTransportOptions oa = insecure_options("a");
  ZmqTransportOptions ob = insecure_options("b");
  ZmqTransport a(std::move(oa));
  ob.bootstrap = {a.endpoint()};
  ZmqTransport b(std::move(ob));
  REQUIRE(eventually([&] { return knows_all(a, {"a", "b"}) && knows_all(b, {"a", "b"}); }));
  a.send("b", push_sum(1, 3));
  auto got = b.receive(30s);
  REQUIRE(got);
  CHECK(got->from == "a");

  // A connection that never said hello cannot deliver.
  zmq::context_t ctx;
  zmq::socket_t s(ctx, zmq::socket_type::dealer);
  s.set(zmq::sockopt::linger, 0);
  s.connect(b.endpoint());
  Message m = push_sum(2, 3);
  auto c = encode_message(m, 0, 1, WireLimits{})[0];
  REQUIRE(s.send(zmq::buffer(c.header), zmq::send_flags::sndmore));
  REQUIRE(s.send(zmq::buffer(m.payload.data(), 12), zmq::send_flags::none));
  CHECK(eventually([&] { return b.rejections().count(RejectCause::kUnknownSender) == 1; }));
  CHECK_FALSE(b.receive(50ms));
}

TEST_CASE("transport options are checked with errors that name the problem", "[peer][zmq][cluster]") {
  Federation fed({"a", "b"});
  auto o = fed.options("a");
  o.name = "bad name";
  CHECK_THROWS_WITH(ZmqTransport(o), Catch::Contains("site name"));
  o = fed.options("a");
  o.keys = fed.keys.at("b");
  CHECK_THROWS_WITH(ZmqTransport(o), Catch::Contains("another public key"));
  o = fed.options("a");
  o.roster.reset();
  CHECK_THROWS_WITH(ZmqTransport(o), Catch::Contains("roster"));
  o = fed.options("a", {"tcp://127.0.0.1:1"});
  CHECK_THROWS_WITH(ZmqTransport(o), Catch::Contains("NAME@"));
  o = fed.options("a");
  o.heartbeat_timeout = o.heartbeat_interval;
  CHECK_THROWS_WITH(ZmqTransport(o), Catch::Contains("heartbeat timeout"));
  o = fed.options("a");
  o.wan = parse_wan_spec("world4");
  o.region = "mars";
  CHECK_THROWS_WITH(ZmqTransport(o), Catch::Contains("region 'mars'") && Catch::Contains("oregon"));
  o = fed.options("a");
  o.listen = "tcp://0.0.0.0:*";
  CHECK_THROWS_WITH(ZmqTransport(o), Catch::Contains("advertised address"));
  o.advertise = "tcp://127.0.0.1:1";
  CHECK(ZmqTransport(o).endpoint() == "tcp://127.0.0.1:1");
  o = fed.options("a");
  o.socket_buffer_bytes = -1;
  CHECK_THROWS_WITH(ZmqTransport(o), Catch::Contains("socket buffer"));
  o = fed.options("a");
  o.io_threads = 0;
  CHECK_THROWS_WITH(ZmqTransport(o), Catch::Contains("io_threads"));
  o = fed.options("a");
  o.listen = "tcp://256.1.1.1:1";
  CHECK_THROWS_AS(ZmqTransport(o), TransportError);
}

namespace {

int port_of(const std::string& endpoint) { return std::stoi(endpoint.substr(endpoint.rfind(':') + 1)); }

// SO_RCVBUF or SO_SNDBUF (`option`) of every TCP socket of this process whose local (`local` true) or
// remote port is `port`.
std::vector<int> socket_buffers(int port, bool local, int option) {
  std::vector<int> sizes;
  for (int fd = 0; fd < 4096; ++fd) {
    sockaddr_in addr{};
    socklen_t len = sizeof addr;
    const int rc = local ? ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len)
                         : ::getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len);
    if (rc != 0 || addr.sin_family != AF_INET || ntohs(addr.sin_port) != port) continue;
    int type = 0, size = 0;
    socklen_t tl = sizeof type, sl = sizeof size;
    if (::getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tl) != 0 || type != SOCK_STREAM) continue;
    sockaddr_in peer{};
    socklen_t pl = sizeof peer;
    if (::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &pl) != 0) continue;  // the listening socket
    if (::getsockopt(fd, SOL_SOCKET, option, &size, &sl) == 0) sizes.push_back(size);
  }
  return sizes;
}

}  // namespace

TEST_CASE("a socket buffer size applies to the connections that carry data, which still arrives intact",
          "[peer][zmq][cluster]") {
  ZmqTransportOptions oa = insecure_options("a");
  oa.socket_buffer_bytes = 48 * 1024;  // Linux reports twice what was set (its bookkeeping overhead)
  ZmqTransportOptions ob = oa;
  ob.name = "b";
  ZmqTransport a(std::move(oa));
  ob.bootstrap = {a.endpoint()};
  ZmqTransport b(std::move(ob));
  REQUIRE(eventually([&] { return knows_all(a, {"a", "b"}) && knows_all(b, {"a", "b"}); }));
  // Several wire chunks, many times the buffer: the sender waits for the reader, nothing is lost.
  a.send("b", push_sum(1, 3'000'000));
  auto got = b.receive(30s);
  REQUIRE(got);
  REQUIRE(got->payload.size() == 3'000'000);
  CHECK(got->payload.front() == 1.0f);
  CHECK(got->payload.back() == 3'000'000.0f);

  // b's listener accepted a's connection (data in) and b's connection to a carries b's data out.
  const auto in = socket_buffers(port_of(b.endpoint()), true, SO_RCVBUF);
  const auto out = socket_buffers(port_of(a.endpoint()), false, SO_SNDBUF);
  REQUIRE_FALSE(in.empty());
  REQUIRE_FALSE(out.empty());
  for (int size : in) CHECK(size == 2 * 48 * 1024);
  for (int size : out) CHECK(size == 2 * 48 * 1024);
}

TEST_CASE("sites with one and with several libzmq I/O threads exchange multi-chunk payloads both ways",
          "[peer][zmq][cluster]") {
  // One I/O thread serves every connection; with more, receiving and sending connections are on
  // different threads. Both must carry whole messages in both directions, in order.
  Federation fed({"a", "b"});
  auto oa = fed.options("a");
  oa.io_threads = 1;
  auto ob = fed.options("b");
  ob.io_threads = 3;
  ZmqTransport a(oa);
  ob.bootstrap = {"a@" + a.endpoint()};
  ZmqTransport b(ob);
  REQUIRE(eventually([&] { return knows_all(a, {"a", "b"}) && knows_all(b, {"a", "b"}); }));
  for (std::uint64_t round = 1; round <= 3; ++round) {
    a.send("b", push_sum(round, 700'000, static_cast<float>(round)));
    b.send("a", push_sum(round, 700'000, static_cast<float>(10 * round)));
  }
  for (std::uint64_t round = 1; round <= 3; ++round) {
    auto at_b = b.receive(30s);
    auto at_a = a.receive(30s);
    REQUIRE(at_b);
    REQUIRE(at_a);
    CHECK(at_b->round == round);
    CHECK(at_a->round == round);
    REQUIRE(at_b->payload.size() == 700'000);
    REQUIRE(at_a->payload.size() == 700'000);
    CHECK(at_b->payload.front() == static_cast<float>(round));
    CHECK(at_b->payload.back() == static_cast<float>(round) + 699'999.0f);
    CHECK(at_a->payload.front() == static_cast<float>(10 * round));
    CHECK(at_a->payload.back() == static_cast<float>(10 * round) + 699'999.0f);
  }
}

namespace {
void ignore_signal(int) {}
}  // namespace

TEST_CASE("signals interrupting the transport's I/O thread do not stop it", "[peer][zmq][cluster]") {
  // The daemon handles SIGINT/SIGTERM; a handler without SA_RESTART makes poll() fail with EINTR in
  // whichever thread receives the signal. libzmq's own threads block signals, so once this thread
  // blocks SIGUSR2 too, the transport's I/O thread is the one that receives it.
  struct sigaction sa {};
  sa.sa_handler = ignore_signal;
  struct sigaction old {};
  REQUIRE(::sigaction(SIGUSR2, &sa, &old) == 0);
  Federation fed({"a", "b"});
  ZmqTransport a(fed.options("a"));
  ZmqTransport b(fed.options("b", {"a@" + a.endpoint()}));
  sigset_t block, previous;
  sigemptyset(&block);
  sigaddset(&block, SIGUSR2);
  REQUIRE(::pthread_sigmask(SIG_BLOCK, &block, &previous) == 0);
  REQUIRE(eventually([&] { return knows_all(a, {"a", "b"}) && knows_all(b, {"a", "b"}); }));
  for (int i = 0; i < 50; ++i) {
    ::kill(::getpid(), SIGUSR2);
    std::this_thread::sleep_for(1ms);
  }
  b.send("a", push_sum(1, 3));
  auto got = a.receive(30s);
  CHECK(got.has_value());
  ::pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  ::sigaction(SIGUSR2, &old, nullptr);
}

TEST_CASE("threads that send and receive on one transport at once lose and duplicate nothing", "[peer][zmq][cluster]") {
  // Whichever thread calls receive() or send() may run the transport's loop (the I/O thread parks
  // meanwhile); several callers at once must hand it over without losing or repeating a message.
  Federation fed({"a", "b", "c"});
  ZmqTransport a(fed.options("a"));
  ZmqTransport b(fed.options("b", {"a@" + a.endpoint()}));
  REQUIRE(eventually([&] { return knows_all(a, {"a", "b"}) && knows_all(b, {"a", "b"}); }));
  constexpr std::uint64_t kEach = 100;  // rounds stay inside the validator's window (256 behind)

  std::mutex mu;
  std::vector<int> seen_by_a(2 * kEach + 1, 0);
  std::atomic<std::uint64_t> received{0};
  bool intact = true;
  auto receiver = [&] {
    while (received < 2 * kEach) {
      auto m = a.receive(200ms);
      if (!m) continue;
      std::lock_guard lock(mu);
      if (m->round >= 1 && m->round <= 2 * kEach) ++seen_by_a[m->round];
      intact = intact && m->payload == push_sum(m->round, 64, static_cast<float>(m->round)).payload;
      ++received;
    }
  };
  auto sender = [&](ZmqTransport& t, const std::string& to, std::uint64_t first) {
    for (std::uint64_t r = first; r < first + kEach; ++r) t.send(to, push_sum(r, 64, static_cast<float>(r)));
  };
  std::thread r1(receiver), r2(receiver);
  std::thread s1([&] { sender(b, "a", 1); }), s2([&] { sender(b, "a", kEach + 1); });
  std::thread s3([&] { sender(a, "b", 1); });  // a sends while its own receivers run its loop
  std::vector<int> seen_by_b(kEach + 1, 0);
  for (std::uint64_t n = 0; n < kEach;) {
    auto m = b.receive(30s);
    REQUIRE(m);
    REQUIRE(m->round >= 1);
    REQUIRE(m->round <= kEach);
    ++seen_by_b[m->round];
    ++n;
  }
  for (auto* t : {&s1, &s2, &s3}) t->join();
  // The receivers stop once they have everything; the bound only guards against a hang.
  REQUIRE(eventually([&] { return received == 2 * kEach; }));
  r1.join();
  r2.join();
  CHECK(intact);
  CHECK(std::count(seen_by_a.begin() + 1, seen_by_a.end(), 1) == static_cast<long>(2 * kEach));
  CHECK(std::count(seen_by_b.begin() + 1, seen_by_b.end(), 1) == static_cast<long>(kEach));
  CHECK(a.rejections().total() == 0);
  CHECK(b.rejections().total() == 0);
  // With nobody calling any more, the I/O threads take their loops back: membership keeps running.
  ZmqTransport c(fed.options("c", {"a@" + a.endpoint()}));
  const std::vector<std::string> all{"a", "b", "c"};
  CHECK(eventually([&] { return knows_all(a, all) && knows_all(b, all) && knows_all(c, all); }));
}

TEST_CASE("receive_into combines payloads into the caller's memory and still refuses non-finite ones",
          "[peer][zmq][sink][cluster]") {
  ZmqTransportOptions oa;
  oa.name = "a";
  oa.insecure = true;
  oa.heartbeat_interval = 50ms;
  oa.heartbeat_timeout = kHeartbeatTimeout;
  ZmqTransportOptions ob = oa;
  ob.name = "b";
  ob.limits.chunk_bytes = 64;  // 16 floats per wire chunk: the longer messages below span several
  ZmqTransport a(std::move(oa));
  ob.bootstrap = {a.endpoint()};
  ZmqTransport b(std::move(ob));
  REQUIRE(eventually([&] { return knows_all(a, {"a", "b"}) && knows_all(b, {"a", "b"}); }));

  auto chunk = [](std::uint32_t phase, std::size_t n, float start) {
    Message m = push_sum(1, n, start);
    m.kind = MessageKind::kReduceChunk;
    m.phase = phase;
    return m;
  };
  for (std::size_t n : {10u, 1000u}) {  // one wire chunk, then many
    INFO(n << " floats");
    const auto base = static_cast<std::uint32_t>(n * 10);
    std::vector<float> data(n, 0.5f);
    std::uint32_t phase = base;
    PayloadSink sink{[&](const Message& m) { return m.from == "b" && m.phase == phase; }, n, data, data, 2.0f, {}};
    // The result also goes back to b, as a ring forwards what it summed.
    sink.relay = PayloadSink::Relay{"b", chunk(base + 5, 0, 0.0f)};
    sink.relay->header.total = n;

    Message nan = chunk(base, n, 1.0f);
    nan.payload[n / 2] = std::nanf("");
    const auto refused = a.rejections().count(RejectCause::kNonFinite);
    b.send("a", nan);
    // Waiting in receive_into, so that the refusal happens on the way into the sink when this thread
    // runs the transport's loop; the bound is only a hang guard.
    const auto guard = std::chrono::steady_clock::now() + 30s;
    while (a.rejections().count(RejectCause::kNonFinite) == refused && std::chrono::steady_clock::now() < guard)
      REQUIRE_FALSE(a.receive_into(sink, 20ms));
    CHECK(a.rejections().count(RejectCause::kNonFinite) == refused + 1);
    CHECK(std::all_of(data.begin(), data.end(), [](float x) { return std::isfinite(x); }));

    std::fill(data.begin(), data.end(), 0.5f);
    b.send("a", chunk(base + 2, n, 1.0f));  // not what the sink waits for: handed back whole
    b.send("a", chunk(base + 1, n, 1.0f));
    phase = base + 1;
    auto other = a.receive_into(sink, 30s);
    REQUIRE(other);
    CHECK_FALSE(other->sunk);
    CHECK(other->msg.payload == chunk(base + 2, n, 1.0f).payload);
    auto got = a.receive_into(sink, 30s);
    REQUIRE(got);
    CHECK(got->sunk);
    CHECK(got->msg.from == "b");
    CHECK(got->msg.phase == base + 1);
    CHECK(got->msg.payload.empty());
    for (std::size_t i = 0; i < n; ++i) REQUIRE(data[i] == (static_cast<float>(i + 1) + 0.5f) * 2.0f);
    auto relayed = b.receive(30s);  // the only one: the refused message was not relayed
    REQUIRE(relayed);
    CHECK(relayed->from == "a");
    CHECK(relayed->phase == base + 5);
    CHECK(relayed->total == n);
    CHECK(relayed->payload == data);
  }
}
