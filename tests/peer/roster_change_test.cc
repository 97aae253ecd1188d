// Changing the roster of running ZeroMQ transports (ZmqTransport::set_roster) on loopback: a site
// refused at first joins once its key is added, without restarting the running sites; a site taken out
// again is expelled at once (its connections cut, its messages dropped, its record "left", the views
// without it) and its key is refused when it connects anew.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>

#include "peer/zmq/zmq_transport.h"
#include "tests/support/eventually.h"

using namespace meridian::peer;
using namespace std::chrono_literals;
using meridian::tests::eventually;

namespace {

struct Keys {
  std::map<std::string, CurveKeyPair> of;
  explicit Keys(const std::vector<std::string>& names) {
    for (const auto& n : names) of[n] = generate_curve_key_pair();
  }
  Roster roster(const std::vector<std::string>& names) const {
    Roster r;
    for (const auto& n : names) r.add({n, of.at(n).public_key, ""});
    return r;
  }
  ZmqTransportOptions options(const std::string& name, const std::vector<std::string>& roster_names,
                              std::vector<std::string> bootstrap = {}) const {
    ZmqTransportOptions o;
    o.name = name;
    o.keys = of.at(name);
    o.roster = roster(roster_names);
    o.bootstrap = std::move(bootstrap);
    o.heartbeat_interval = 50ms;
    // Deaths are not what this test is about: a starved I/O thread must not make one.
    o.heartbeat_timeout = 10s;
    o.validation.model_fingerprint = 0x5eed;
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

MemberState state_of(const ZmqTransport& t, const std::string& name) {
  for (const auto& m : t.members())
    if (m.record.name == name) return m.record.state;
  return MemberState::kDead;
}

}  // namespace

TEST_CASE("a key added to running sites' rosters joins, and removed again it is expelled and refused",
          "[peer][zmq][roster][cluster]") {
  Keys keys({"a", "b", "c"});
  ZmqTransport a(keys.options("a", {"a", "b"}));
  ZmqTransport b(keys.options("b", {"a", "b"}, {"a@" + a.endpoint()}));
  const std::vector<std::string> ab{"a", "b"}, abc{"a", "b", "c"};
  REQUIRE(eventually([&] { return a.alive_members() == ab && b.alive_members() == ab; }));

  // c knows everybody, but nobody knows c yet: its handshake is refused (and libzmq does not retry a
  // connection refused by authentication).
  {
    ZmqTransport early(keys.options("c", abc, {"a@" + a.endpoint()}));
    REQUIRE(eventually([&] { return a.stats().zap_denied > 0; }));
    CHECK(a.alive_members() == ab);
  }

  // Admitted at both running sites, c (started again) joins them.
  a.set_roster(keys.roster(abc));
  b.set_roster(keys.roster(abc));
  ZmqTransport c(keys.options("c", abc, {"a@" + a.endpoint()}));
  REQUIRE(eventually([&] {
    return a.alive_members() == abc && b.alive_members() == abc && c.alive_members() == abc &&
           a.latest_view().members == abc && a.latest_view() == b.latest_view() && b.latest_view() == c.latest_view();
  }));
  c.send("a", push_sum(1));
  REQUIRE(eventually([&] { return a.receive(0ms).has_value(); }));

  // Out again: a and b expel c at once (no heartbeat timeout: 10 s here) and agree on a view without it.
  const auto denied_before = a.stats().zap_denied;
  const auto stale_before = a.rejections().count(RejectCause::kStaleKey);
  a.set_roster(keys.roster(ab));
  b.set_roster(keys.roster(ab));
  REQUIRE(eventually([&] {
    return a.alive_members() == ab && b.alive_members() == ab && a.latest_view().members == ab &&
           a.latest_view() == b.latest_view();
  }));
  CHECK(state_of(a, "c") == MemberState::kLeft);
  CHECK(state_of(b, "c") == MemberState::kLeft);
  // The connection c opened before is cut; what c still sends on it is dropped and counted, and its
  // reconnection is refused by the ZAP handler.
  c.send("a", push_sum(2));
  CHECK(eventually([&] {
    return a.rejections().count(RejectCause::kStaleKey) > stale_before || a.stats().zap_denied > denied_before;
  }));
  CHECK_FALSE(a.receive(200ms).has_value());
  // A new connection from c (a restart, say) is refused by the ZAP handler.
  ZmqTransport c2(keys.options("c", abc, {"a@" + a.endpoint()}));
  CHECK(eventually([&] { return a.stats().zap_denied > denied_before; }));
  CHECK(a.alive_members() == ab);
}

TEST_CASE("a roster without this site, or with another key for it, is refused and changes nothing",
          "[peer][zmq][roster][cluster]") {
  Keys keys({"a", "b"});
  ZmqTransport a(keys.options("a", {"a", "b"}));
  CHECK_THROWS_WITH(a.set_roster(keys.roster({"b"})), Catch::Contains("does not list this site ('a')"));
  Roster other;
  other.add({"a", generate_curve_key_pair().public_key, ""});
  CHECK_THROWS_WITH(a.set_roster(other), Catch::Contains("another public key for this site ('a')"));
  // Still admitting b.
  ZmqTransport b(keys.options("b", {"a", "b"}, {"a@" + a.endpoint()}));
  CHECK(eventually([&] { return a.alive_members() == std::vector<std::string>{"a", "b"}; }));

  ZmqTransportOptions plain;
  plain.name = "p";
  plain.insecure = true;
  ZmqTransport p(plain);
  CHECK_THROWS_WITH(p.set_roster(keys.roster({"a"})), Catch::Contains("has no roster to change"));
}
