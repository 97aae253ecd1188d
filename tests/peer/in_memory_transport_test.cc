#include <catch2/catch.hpp>

#include <thread>

#include "error/error.h"
#include "peer/in_memory_transport.h"

using namespace meridian::peer;
using namespace std::chrono_literals;

TEST_CASE("in-memory transport delivers FIFO per pair and names the sender", "[peer][in_memory][cluster]") {
  auto net = InMemoryNetwork::create({"b", "a"});
  auto a = net->endpoint("a");
  auto b = net->endpoint("b");
  for (std::uint64_t r = 0; r < 5; ++r) {
    Message m;
    m.kind = MessageKind::kPushSum;
    m.round = r;
    m.from = "forged";
    a->send("b", std::move(m));
  }
  for (std::uint64_t r = 0; r < 5; ++r) {
    auto got = b->receive(100ms);
    REQUIRE(got);
    CHECK(got->round == r);
    CHECK(got->from == "a");
  }
  CHECK_FALSE(b->receive(10ms));
  CHECK(a->view_for(0).members == std::vector<std::string>{"a", "b"});
}

TEST_CASE("in-memory transport drops mail to and from a killed site", "[peer][in_memory][cluster]") {
  auto net = InMemoryNetwork::create({"a", "b"});
  auto a = net->endpoint("a");
  auto b = net->endpoint("b");
  net->kill("b");
  a->send("b", Message{});
  b->send("a", Message{});
  CHECK(net->dropped() == 2);
  CHECK_FALSE(a->receive(10ms));
  CHECK_THROWS_AS(net->endpoint("nobody"), meridian::error::InternalError);
}

TEST_CASE("in-memory views take effect at their announced round", "[peer][in_memory][cluster]") {
  auto net = InMemoryNetwork::create({"a", "b", "c"});
  auto a = net->endpoint("a");
  net->announce(View::of({"a", "c"}, 1, 10));
  CHECK(a->view_for(9).size() == 3);
  CHECK(a->view_for(10).size() == 2);
  CHECK(a->view_for(10).rank_of("c") == 1u);
  CHECK_FALSE(a->view_for(10).rank_of("b"));
}
