// InMemoryFederation: whole federations in one process on the in-memory network, running the same
// membership protocol and driver as the ZeroMQ transport. The scenarios that both implementations
// share run on both through the FederationTransport interface.
#include <catch2/catch.hpp>

#include <algorithm>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <thread>

#include "peer/in_memory_federation.h"
#include "peer/wire_codec.h"
#include "peer/zmq/zmq_transport.h"
#include "tests/support/eventually.h"

using namespace meridian::peer;
using namespace std::chrono_literals;

namespace {

using meridian::tests::eventually;

// Tests that are not about death detection must never see one, however starved the threads are.
constexpr auto kNoDeathTimeout = 10s;

InMemoryFederationOptions member(const std::string& name, std::vector<std::string> bootstrap = {},
                                 std::chrono::milliseconds timeout = kNoDeathTimeout) {
  InMemoryFederationOptions o;
  o.name = name;
  o.bootstrap = std::move(bootstrap);
  o.heartbeat_interval = 50ms;
  o.heartbeat_timeout = timeout;
  return o;
}

std::unique_ptr<FederationTransport> join(const std::shared_ptr<InMemoryNetwork>& net, InMemoryFederationOptions o) {
  return std::make_unique<InMemoryFederation>(net, std::move(o));
}

// Starts one site of a federation named `name`, bootstrapping from `first` (nullptr for the first site).
using SiteFactory =
    std::function<std::unique_ptr<FederationTransport>(const std::string& name, const FederationTransport* first)>;

SiteFactory in_memory_sites() {
  auto net = InMemoryNetwork::create({});
  return [net](const std::string& name, const FederationTransport* first) {
    return join(net, member(name, first ? std::vector<std::string>{first->self()} : std::vector<std::string>{}));
  };
}

SiteFactory zmq_sites() {
  return [](const std::string& name, const FederationTransport* first) -> std::unique_ptr<FederationTransport> {
    ZmqTransportOptions o;
    o.name = name;
    o.insecure = true;
    o.heartbeat_interval = 50ms;
    o.heartbeat_timeout = kNoDeathTimeout;
    if (first) o.bootstrap = {first->self() + "@" + first->endpoint()};
    return std::make_unique<ZmqTransport>(std::move(o));
  };
}

bool all_agree(const std::vector<FederationTransport*>& sites, const std::vector<std::string>& members) {
  for (auto* s : sites)
    if (s->alive_members() != members || s->latest_view().members != members ||
        s->latest_view() != sites.front()->latest_view())
      return false;
  return true;
}

const MemberStatus* status_of(const std::vector<MemberStatus>& members, const std::string& name) {
  auto it = std::find_if(members.begin(), members.end(), [&](const MemberStatus& m) { return m.record.name == name; });
  return it == members.end() ? nullptr : &*it;
}

Message push_sum(std::uint64_t round, std::vector<float> payload) {
  Message m;
  m.kind = MessageKind::kPushSum;
  m.round = round;
  m.total = payload.size();
  m.weight = 0.5;
  m.payload = std::move(payload);
  return m;
}

// Four sites join from one bootstrap, agree on one view, exchange mixer and control messages, then
// one leaves gracefully and the others agree on the next view without it.
void join_exchange_and_leave(const SiteFactory& make) {
  auto a = make("a", nullptr);
  auto b = make("b", a.get());
  auto c = make("c", a.get());
  auto d = make("d", a.get());
  const std::vector<std::string> all{"a", "b", "c", "d"};
  REQUIRE(eventually([&] { return all_agree({a.get(), b.get(), c.get(), d.get()}, all); }));
  const View v = a->latest_view();
  CHECK(v.id > 0);
  CHECK(d->view_for(v.effective_round) == v);
  CHECK(d->view_for(v.effective_round).rank_of("c") == 2u);

  b->send("d", push_sum(1, {1.0f, 2.0f, 3.0f}));
  auto got = d->receive(10s);
  REQUIRE(got);
  CHECK(got->from == "b");
  CHECK(got->kind == MessageKind::kPushSum);
  CHECK(got->payload == std::vector<float>{1.0f, 2.0f, 3.0f});
  Message control;
  control.kind = MessageKind::kControl;
  control.body = "plan";
  c->send("a", control);
  auto plan = a->receive_control(10s);
  REQUIRE(plan);
  CHECK(plan->from == "c");
  CHECK(plan->body == "plan");
  CHECK_FALSE(a->receive(0ms));  // control messages do not reach the mixer inbox

  c->leave();
  CHECK_THROWS_AS(c->send("a", push_sum(2, {1.0f})), TransportError);
  CHECK_THROWS_AS(c->receive(0ms), TransportError);
  const std::vector<std::string> rest{"a", "b", "d"};
  REQUIRE(eventually([&] { return all_agree({a.get(), b.get(), d.get()}, rest); }));
  for (auto* s : {a.get(), b.get(), d.get()}) {
    const auto members = s->members();
    const auto* gone = status_of(members, "c");
    REQUIRE(gone);
    CHECK(gone->record.state == MemberState::kLeft);
  }
  CHECK(a->latest_view().id > v.id);
  // Mail to the departed site is dropped and counted, not queued.
  const auto dropped = a->stats().dropped_unreachable;
  a->send("c", push_sum(3, {1.0f}));
  CHECK(eventually([&] { return a->stats().dropped_unreachable > dropped; }));
}

}  // namespace

TEST_CASE("in-memory federation: four sites join from one bootstrap, exchange messages, and one leaves",
          "[peer][in_memory][federation][cluster]") {
  join_exchange_and_leave(in_memory_sites());
}

TEST_CASE("ZeroMQ federation: the same scenario through the FederationTransport interface",
          "[peer][zmq][federation][cluster]") {
  join_exchange_and_leave(zmq_sites());
}

TEST_CASE("in-memory federation: a view change for a late joiner takes effect ahead of every member's round",
          "[peer][in_memory][federation][cluster]") {
  auto net = InMemoryNetwork::create({});
  InMemoryFederation a(net, member("a"));
  InMemoryFederation b(net, member("b", {"a"}));
  REQUIRE(eventually([&] { return all_agree({&a, &b}, {"a", "b"}); }));
  const View first = a.latest_view();
  a.set_round(100);
  b.set_round(100);

  InMemoryFederation c(net, member("c", {"b"}));
  const std::vector<std::string> all{"a", "b", "c"};
  REQUIRE(eventually([&] { return all_agree({&a, &b, &c}, all); }));
  const View second = a.latest_view();
  CHECK(second.id > first.id);
  CHECK(second.effective_round >= 100 + InMemoryFederationOptions{}.view_lead_rounds);
  // Until the announced round the old view stays in force everywhere, from it on the new one.
  for (auto* s : {&a, &b, &c}) {
    CHECK(s->view_for(second.effective_round - 1).members == std::vector<std::string>{"a", "b"});
    CHECK(s->view_for(second.effective_round) == second);
  }
  CHECK(c.view_for(second.effective_round).rank_of("c") == 2u);
}

TEST_CASE("in-memory federation: a crashed site is declared dead and left out of the next view",
          "[peer][in_memory][federation][cluster]") {
  auto net = InMemoryNetwork::create({});
  // A short timeout: a starved thread may make a live site look dead for a while, but it refutes,
  // and the condition below waits for the settled outcome.
  InMemoryFederation a(net, member("a", {}, 500ms));
  InMemoryFederation b(net, member("b", {"a"}, 500ms));
  InMemoryFederation c(net, member("c", {"a"}, 500ms));
  REQUIRE(eventually([&] { return all_agree({&a, &b, &c}, {"a", "b", "c"}); }));
  const View before = a.latest_view();

  net->kill("c");
  REQUIRE(eventually([&] { return all_agree({&a, &b}, {"a", "b"}); }));
  for (auto* s : {&a, &b}) {
    const auto members = s->members();
    const auto* dead = status_of(members, "c");
    REQUIRE(dead);
    CHECK(dead->record.state == MemberState::kDead);
  }
  CHECK(a.latest_view().id > before.id);
}

TEST_CASE("in-memory federation: a site that left can join again under its name, a second one cannot",
          "[peer][in_memory][federation][cluster]") {
  auto net = InMemoryNetwork::create({});
  InMemoryFederation a(net, member("a"));
  auto b = join(net, member("b", {"a"}));
  REQUIRE(eventually([&] { return all_agree({&a, b.get()}, {"a", "b"}); }));
  CHECK_THROWS_WITH(InMemoryFederation(net, member("b")), Catch::Contains("'b' is already a member"));

  b->leave();
  REQUIRE(eventually([&] { return all_agree({&a}, {"a"}); }));
  b = join(net, member("b", {"a"}));  // a new process: a higher incarnation than the one that left
  REQUIRE(eventually([&] { return all_agree({&a, b.get()}, {"a", "b"}); }));
  CHECK_THROWS_WITH(InMemoryFederation(net, member("no spaces")), Catch::Contains("'no spaces'"));
  CHECK_THROWS_WITH(InMemoryFederation(net, member("x", {}, 50ms)), Catch::Contains("must exceed"));
}

TEST_CASE("in-memory federation: messages from outside the membership are refused and counted",
          "[peer][in_memory][federation][cluster]") {
  auto net = InMemoryNetwork::create({"mallory"});
  auto mallory = net->endpoint("mallory");  // a plain endpoint: it never joins the membership
  InMemoryFederation a(net, member("a"));

  mallory->send("a", push_sum(1, {1.0f}));
  Message forged_hello;
  forged_hello.kind = MessageKind::kHello;
  forged_hello.body = encode_hello(HelloInfo{"b", "tcp://b.in-memory.invalid:1", "", 1, 0, {}, {}});
  mallory->send("a", forged_hello);
  Message garbage;
  garbage.kind = MessageKind::kMembers;
  garbage.body = "\xff\xff not a member list";
  mallory->send("a", garbage);

  REQUIRE(eventually([&] { return a.rejections().total() == 3; }));
  CHECK(a.rejections().count(RejectCause::kUnknownSender) == 2);
  CHECK(a.rejections().count(RejectCause::kMalformed) == 1);
  CHECK_FALSE(a.receive(0ms));
  CHECK(a.alive_members() == std::vector<std::string>{"a"});
}

TEST_CASE("in-memory federation: received messages pass the message validator, counted as on TCP",
          "[peer][in_memory][federation][cluster]") {
  auto net = InMemoryNetwork::create({});
  const auto validated = [](const std::string& name, std::vector<std::string> bootstrap, std::uint64_t fingerprint) {
    auto o = member(name, std::move(bootstrap));
    o.validation.model_fingerprint = fingerprint;
    o.validation.model_elements = 3;
    return o;
  };
  InMemoryFederation a(net, validated("a", {}, 7));
  InMemoryFederation b(net, validated("b", {"a"}, 7));
  REQUIRE(eventually([&] { return a.alive_members().size() == 2 && b.alive_members().size() == 2; }));

  b.send("a", push_sum(1, {1.0f, 2.0f}));  // not the model's length
  b.send("a", push_sum(1, {1.0f, std::numeric_limits<float>::quiet_NaN(), 3.0f}));
  auto heavy = push_sum(1, {1.0f, 2.0f, 3.0f});
  heavy.weight = 1e9;
  b.send("a", heavy);
  b.send("a", push_sum(1, {1.0f, 2.0f, 3.0f}));
  b.send("a", push_sum(1, {1.0f, 2.0f, 3.0f}));  // the same message again
  REQUIRE(eventually([&] { return a.rejections().total() >= 4; }));
  CHECK(a.rejections().count(RejectCause::kTensorLength) == 1);
  CHECK(a.rejections().count(RejectCause::kNonFinite) == 1);
  CHECK(a.rejections().count(RejectCause::kWeightRange) == 1);
  CHECK(a.rejections().count(RejectCause::kReplayed) == 1);
  const auto got = a.receive(10s);
  REQUIRE(got);
  CHECK(got->payload == std::vector<float>{1.0f, 2.0f, 3.0f});
  CHECK_FALSE(a.receive(0ms));

  // Another model's site is refused on the fingerprint its messages carry and never becomes a member.
  InMemoryFederation other(net, validated("c", {"a"}, 9));
  REQUIRE(eventually([&] { return a.rejections().count(RejectCause::kFingerprint) >= 1; }));
  CHECK(a.alive_members() == std::vector<std::string>{"a", "b"});
}
