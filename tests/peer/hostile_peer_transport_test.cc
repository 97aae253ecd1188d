// A rostered member turned hostile (tests/peer/hostile_peer.h) against ZeroMQ transports in this
// process, over loopback with CurveZMQ: addresses a transport must never dial (a form libzmq cannot
// parse, another transport) are refused at decode and counted, and the transport goes on; in secure
// mode the roster's address for a site wins over the one it announces; a key replaced in the roster
// stops counting at once on the connection it opened, which is cut, and cannot connect again.
#include <catch2/catch.hpp>

#include <map>
#include <string>
#include <vector>

#include "peer/zmq/zmq_transport.h"
#include "tests/peer/hostile_peer.h"
#include "tests/support/eventually.h"

using namespace meridian::peer;
using namespace std::chrono_literals;
using meridian::tests::HostilePeer;
using meridian::tests::eventually;

namespace {

constexpr std::uint64_t kFingerprint = 0x5eed;

struct Keys {
  std::map<std::string, CurveKeyPair> of;
  explicit Keys(const std::vector<std::string>& names) {
    for (const auto& n : names) of[n] = generate_curve_key_pair();
  }
  Roster roster(const std::map<std::string, std::string>& addresses = {}) const {
    Roster r;
    for (const auto& [n, k] : of) r.add({n, k.public_key, addresses.contains(n) ? addresses.at(n) : ""});
    return r;
  }
  ZmqTransportOptions options(const std::string& name, std::vector<std::string> bootstrap = {}) const {
    ZmqTransportOptions o;
    o.name = name;
    o.keys = of.at(name);
    o.roster = roster();
    o.bootstrap = std::move(bootstrap);
    o.heartbeat_interval = 50ms;
    // Deaths are not what this test is about: a starved I/O thread must not make one.
    o.heartbeat_timeout = 10s;
    o.validation.model_fingerprint = kFingerprint;
    return o;
  }
};

Message push_sum(std::uint64_t round) {
  Message m;
  m.kind = MessageKind::kPushSum;
  m.round = round;
  m.total = 4;
  m.weight = 0.5;
  m.payload = {1, 2, 3, 4};
  return m;
}

HelloInfo hello_of(const std::string& name, const std::string& address) {
  HelloInfo h;
  h.name = name;
  h.listen_address = address;
  h.incarnation = 1;
  return h;
}

}  // namespace

TEST_CASE("a member announcing an address libzmq cannot parse, or another transport, is refused and the site goes on",
          "[peer][zmq][hostile][address][cluster]") {
  Keys keys({"a", "b", "mallory"});
  ZmqTransport a(keys.options("a"));
  ZmqTransport b(keys.options("b", {"a@" + a.endpoint()}));
  const std::vector<std::string> ab{"a", "b"};
  REQUIRE(eventually([&] { return a.alive_members() == ab && b.alive_members() == ab; }));

  HostilePeer mallory(keys.of.at("mallory"), a.endpoint(), keys.of.at("a").public_key);
  mallory.set_fingerprint(kFingerprint);
  for (const std::string bad : {"tcp://nohost", "ipc://x", "inproc://zeromq.zap.01", "tcp://eth0;127.0.0.1:1"})
    mallory.send_hello(hello_of("mallory", bad));
  REQUIRE(eventually([&] { return a.rejections().count(RejectCause::kAddress) == 4; }));

  // Gossip naming b at an address to dial: the whole list is refused, b's record stays as it was.
  MemberListInfo gossip;
  gossip.members = {{"b", "ipc:///tmp/meridian-b", "", 1ull << 62, MemberState::kAlive}};
  const auto refused = a.rejections().total();
  mallory.send_members(gossip);
  REQUIRE(eventually([&] { return a.rejections().total() > refused; }));
  for (const auto& m : a.members())
    if (m.record.name == "b") CHECK(m.record.address == b.endpoint());

  // The transport is still up, and b still a member whose messages arrive.
  CHECK(a.alive_members() == ab);
  b.send("a", push_sum(1));
  CHECK(eventually([&] { return a.receive(0ms).has_value(); }));
  a.send("b", push_sum(1));
  CHECK(eventually([&] { return b.receive(0ms).has_value(); }));
}

TEST_CASE("in secure mode a site dials the roster's address for a member, not the one it announces",
          "[peer][zmq][hostile][address][cluster]") {
  Keys keys({"a", "mallory"});
  ZmqTransport a(keys.options("a"));
  HostilePeer mallory(keys.of.at("mallory"), a.endpoint(), keys.of.at("a").public_key);
  mallory.set_fingerprint(kFingerprint);
  // The roster says where mallory listens; mallory announces a port nobody listens on (it could as
  // well be a host inside a's network).
  a.set_roster(keys.roster({{"mallory", mallory.listen_address()}}));
  const std::string elsewhere = "tcp://127.0.0.1:9";
  for (int attempt = 0; attempt < 100 && !mallory.receive(200ms); ++attempt) mallory.send_hello(hello_of("mallory", elsewhere));
  // a answered at the roster's address: its hello (or its member table) arrived there.
  REQUIRE(eventually([&] {
    for (const auto& m : a.members())
      if (m.record.name == "mallory") return m.record.state == MemberState::kAlive;
    return false;
  }));
  CHECK(mallory.receive(5s).has_value());
}

TEST_CASE("a replaced key is refused on the connection it opened, which is cut, and cannot connect again",
          "[peer][zmq][hostile][roster][cluster]") {
  Keys keys({"a", "b", "mallory"});
  ZmqTransport a(keys.options("a"));
  ZmqTransport b(keys.options("b", {"a@" + a.endpoint()}));
  const std::vector<std::string> ab{"a", "b"};
  REQUIRE(eventually([&] { return a.alive_members() == ab && b.alive_members() == ab; }));

  // mallory holds b's key (stolen), and speaks as b on a connection of its own.
  HostilePeer thief(keys.of.at("b"), a.endpoint(), keys.of.at("a").public_key);
  thief.set_fingerprint(kFingerprint);
  thief.send_heartbeat(HeartbeatInfo{});
  REQUIRE(eventually([&] { return thief.events().handshakes_ok == 1; }));

  // b's operator replaces the key at a (the key rotation procedure of docs/deploy.md).
  Keys rotated = keys;
  rotated.of["b"] = generate_curve_key_pair();
  const auto stale_before = a.rejections().count(RejectCause::kStaleKey);
  a.set_roster(rotated.roster());
  // The thief's connection is cut (as is b's own: b is expelled until it restarts with its new key).
  REQUIRE(eventually([&] { return thief.events().closed > 0; }));
  // Whatever it still sends is refused: on a connection still open, by key; a new connection, at the
  // handshake.
  thief.send(push_sum(1));
  REQUIRE(eventually([&] {
    return a.rejections().count(RejectCause::kStaleKey) > stale_before || thief.events().handshakes_denied > 0;
  }));
  REQUIRE(eventually([&] { return thief.events().handshakes_denied > 0; }));
  CHECK(a.stats().zap_denied > 0);
  CHECK_FALSE(a.receive(200ms).has_value());

  // b, restarted with its new key, is a member again.
  ZmqTransport b2(rotated.options("b", {"a@" + a.endpoint()}));
  CHECK(eventually([&] { return a.alive_members() == ab && b2.alive_members() == ab; }));
  b2.send("a", push_sum(2));
  CHECK(eventually([&] { return a.receive(0ms).has_value(); }));
}
